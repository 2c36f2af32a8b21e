"""attention: the FLOP count, the cases per device, skipped backends, and the fraction of this
build's own matmul peak."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from fakes import FakeBenchmark, RunContext, run_with
from gpubench.harness.measurement.cases import CaseSkipped
from gpubench.harness.catalog import spec_for
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.catalog.profiles import Profile
from gpubench.harness.records.results import ResultsWriter
from gpubench.harness.records.schema import COLUMNS, SCHEMA_VERSION
from gpubench.harness.measurement.timing import SyncedClock
from gpubench.harness.workloads import attention
from gpubench.harness.workloads.common import matmul_peak
from gpubench.harness.workloads.attention import AttentionCase, attention_flops
from gpubench.harness.workloads.common.matmul_peak import MatmulPeak
from gpubench.reports.render import plots
from gpubench.reports.render import summary
from gpubench.reports.render.build import build_report

CPU = torch.device("cpu")


def ctx(
    device: str = "cpu", profile: Profile = Profile.QUICK, build_index: int = 0
) -> BuildContext:
    return BuildContext(torch.device(device), profile, SyncedClock(CPU), build_index=build_index)


def tiny(
    op: str = "fwd", backend: str = "math", causal: bool = False, dtype: str = "fp32"
) -> AttentionCase:
    return AttentionCase(dtype, op, backend, causal, seq_len=16, batch_size=2, heads=3, head_dim=8)


def test_flops_by_hand() -> None:
    # 4·B·H·S²·D: B=2, H=3, S=5, D=7 -> 4·2·3·25·7 = 4200; causal halves it; fwd_bwd is 1 + 2.5
    # forwards
    assert attention_flops(2, 3, 5, 7, False, "fwd") == 4200
    assert attention_flops(2, 3, 5, 7, True, "fwd") == 2100
    assert attention_flops(2, 3, 5, 7, False, "fwd_bwd") == 14700
    assert attention_flops(2, 3, 5, 7, True, "fwd_bwd") == 7350
    with pytest.raises(ValueError, match="use one of fwd, fwd_bwd"):
        attention_flops(2, 3, 5, 7, False, "bwd")


def counted_flops(case: AttentionCase) -> int:
    """torch's own count of the math backend's products (bmm by bmm) for one call of the case."""
    call = attention.attention_call(case, CPU)
    with FlopCounterMode(display=False) as counter:
        call()
    return counter.get_total_flops()


def test_flops_agree_with_torchs_flop_counter_on_the_math_backend() -> None:
    case = tiny()
    assert counted_flops(case) == attention_flops(2, 3, 16, 8, False, "fwd")
    # the math backend computes the masked half too: the causal count is half of what it runs
    assert 2 * attention_flops(2, 3, 16, 8, True, "fwd") == counted_flops(tiny(causal=True))
    # its backward is four products (2 forwards); flash-attention's 2.5 adds the recomputed Q·Kᵀ
    # (2·B·H·S²·D)
    recomputed_qk = 2 * 2 * 3 * 16**2 * 8
    assert counted_flops(tiny("fwd_bwd")) + recomputed_qk == attention_flops(
        2, 3, 16, 8, False, "fwd_bwd"
    )


def test_cases_per_device_and_profile() -> None:
    cpu = attention.cases(ctx())
    # fp16 has no fast CPU kernels: not a case there
    assert {c.dtype for c in cpu} == {"fp32", "bf16"}
    assert sorted({c.seq_len for c in cpu if c.dtype == "fp32"}) == [64, 256]
    # the cheap end only in quick
    assert {c.seq_len for c in cpu if c.dtype == "bf16"} == {64}
    assert {c.sdpa_backend for c in cpu} == {"math", "flash", "efficient", "cudnn"}
    assert {c.op for c in cpu} == {"fwd", "fwd_bwd"}
    assert cpu[0].case_id == "attention/fp32-fwd-math-noncausal-s64-bs4-h4-d64"
    # only the device's type is read: no GPU needed
    cuda = attention.cases(ctx("cuda"))
    assert {c.dtype for c in cuda} == {"fp32", "bf16", "fp16"} and max(
        c.seq_len for c in cuda
    ) == 16384
    assert all(
        c.batch_size * c.seq_len == 16384 and (c.heads, c.head_dim) == (16, 128) for c in cuda
    )
    assert len({c.case_id for c in cuda}) == len(cuda) == 3 * 2 * 4 * 2 * 3


def test_declared_columns_join_the_schema() -> None:
    for name in (
        "seq_len",
        "sdpa_backend",
        "causal",
        "measured_peak_tflops",
        "pct_of_measured_peak",
    ):
        assert COLUMNS.count(name) == 1
    assert spec_for("attention").report.plot.panels == ("dtype", "op")


def test_the_timed_call_returns_gradients_without_accumulating_them() -> None:
    grads = attention.attention_call(tiny("fwd_bwd", "flash", causal=True), CPU)()
    assert len(grads) == 3 and all(g.shape == (2, 3, 16, 8) for g in grads)
    out = attention.attention_call(tiny("fwd"), CPU)()
    assert out.shape == (2, 3, 16, 8) and not out.requires_grad


def test_a_backend_the_cpu_lacks_is_skipped_with_torchs_reason() -> None:
    with pytest.raises(
        CaseSkipped, match="sdpa backend efficient cannot run this case on cpu: RuntimeError"
    ):
        attention.set_up(tiny(backend="efficient"), ctx())
    assert attention.backend_skip_reason(tiny(backend="flash"), CPU) is None


def refuses_backward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool
) -> torch.Tensor:
    """A backend whose forward runs but whose backward torch refuses, saying why first (as torch's
    sdp_utils warns before it raises)."""

    class Refused(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            return x.clone()

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
            import warnings

            warnings.warn(
                "Flash attention kernel not used because: requires_grad with head_dim 8 is "
                "unsupported (Triggered internally at "
                "/pytorch/aten/src/ATen/native/transformers/cuda/sdp_utils.cpp:986.)",
                # torch's C++ warnings end so
                stacklevel=2,
            )
            raise RuntimeError("No available kernel. Aborting execution.")

    return Refused.apply(F.scaled_dot_product_attention(q, k, v, is_causal=is_causal))


def test_the_reason_is_what_torch_said_before_refusing() -> None:
    assert attention.backend_skip_reason(tiny("fwd", "flash"), CPU, refuses_backward) is None
    reason = attention.backend_skip_reason(tiny("fwd_bwd", "flash"), CPU, refuses_backward)
    assert reason == (
        "sdpa backend flash cannot run this case on cpu: Flash attention kernel not used because: "
        "requires_grad with head_dim 8 is unsupported; "
        "RuntimeError: No available kernel. Aborting execution."
    )


def test_a_skipped_backend_is_a_skipped_row() -> None:
    run = RunContext(ctx(profile=Profile.SMOKE), {}, None)
    row = run_with(tiny(backend="cudnn"), attention.WORKLOAD, FakeBenchmark(), run)
    assert row["status"] == "skipped" and row["reason"].startswith(
        "sdpa backend cudnn cannot run this case on cpu"
    )
    assert row["sdpa_backend"] == "cudnn" and row.get("tflops") is None


def test_the_row_holds_its_fraction_of_this_builds_matmul(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        attention, "measured_peak", lambda dtype, ctx: MatmulPeak(tflops=1e-5, n=64)
    )
    run = RunContext(ctx(profile=Profile.SMOKE), {}, None)
    row = run_with(tiny("fwd_bwd", causal=True), attention.WORKLOAD, FakeBenchmark([0.002]), run)
    # 86016 in 2 ms: 4.3008e-05 TFLOP/s, 430% of 1e-5
    flops = 4 * 2 * 3 * 16**2 * 8 / 2 * 3.5
    assert row["status"] == "ok" and row["tflops"] == pytest.approx(flops / 0.002 / 1e12)
    assert row["pct_of_measured_peak"] == pytest.approx(430.08)
    assert (row["measured_peak_tflops"], row["measured_peak_n"]) == (1e-5, 64)
    assert "430% of this build's fp32 matmul (n=64)" in row["reason"]


def test_the_matmul_peak_is_measured_once_per_dtype_and_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(matmul_peak, "_MEASURED", {})
    monkeypatch.setattr(matmul_peak, "CPU_N", 32)
    monkeypatch.setattr(matmul_peak, "CPU_EMULATED_N", 32)
    sizes: list[int] = []
    real = matmul_peak.operands
    monkeypatch.setattr(
        matmul_peak, "operands", lambda n, dtype, device: sizes.append(n) or real(n, dtype, device)
    )
    first = matmul_peak.measured_peak("fp32", ctx(profile=Profile.SMOKE))
    assert (
        matmul_peak.measured_peak("fp32", ctx(profile=Profile.SMOKE)) is first
        and first.n == 32
        and first.tflops > 0
    )
    matmul_peak.measured_peak("bf16", ctx(profile=Profile.SMOKE))
    # another build measures its own
    matmul_peak.measured_peak("fp32", ctx(profile=Profile.SMOKE, build_index=1))
    assert sizes == [32, 32, 32]


def test_the_peak_size_follows_what_the_cpu_computes_natively(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(matmul_peak, "cpu_computes_natively", lambda dtype: dtype == "fp32")
    assert matmul_peak.peak_n(CPU, "fp32") == 1024 and matmul_peak.peak_n(CPU, "bf16") == 256
    assert matmul_peak.peak_n(torch.device("cuda"), "bf16") == 8192


def report_cases() -> pd.DataFrame:
    rows = [
        ("m", "attention", "fwd", "bf16", "flash", 512, 2.0, 2.5, 80.0),
        ("m", "attention", "fwd", "fp32", "math", 256, 2.2, 1.0, 90.0),
        ("m", "attention", "fwd_bwd", "fp32", "flash", 256, 3.0, 3.0, 30.0),
    ]
    frame = pd.DataFrame(
        rows,
        columns=[
            "machine",
            "workload",
            "op",
            "dtype",
            "sdpa_backend",
            "seq_len",
            "tflops",
            "tflops_q1",
            "pct_of_measured_peak",
        ],
    )
    return frame.assign(causal=True, spread=float("nan"))


def test_the_summary_holds_the_declared_best_case_per_pass() -> None:
    rows = summary.declared_summary(report_cases(), "m")
    # the best lower quartile over builds, not the best median
    assert rows["attention forward, best"] == "2 TFLOP/s, 80% of matmul (bf16 flash s512)"
    assert rows["attention fwd+bwd, best"] == "3 TFLOP/s, 30% of matmul (fp32 flash s256)"


def test_the_declared_plot_has_a_panel_per_machine_dtype_and_pass(tmp_path: Path) -> None:
    cases = report_cases()
    titles = [title for title, _ in plots._spec_panels(cases, ("dtype", "op"))]
    assert titles == [
        "m · dtype=bf16 · op=fwd",
        "m · dtype=fp32 · op=fwd",
        "m · dtype=fp32 · op=fwd_bwd",
    ]
    assert (
        plots._hue_labels(cases, ("sdpa_backend", "causal")).iloc[0]
        == "sdpa_backend=flash, causal=True"
    )
    png = plots.spec_plot(cases, spec_for("attention").report.plot, tmp_path / "attention.png")
    assert png is not None and png.stat().st_size > 0


def attention_row(op: str, backend: str, tflops: float, status: str = "ok") -> dict[str, Any]:
    case = AttentionCase("bf16", op, backend, True, 512, 2, 4, 64)
    row = dict(
        case.settings(),
        schema_version=SCHEMA_VERSION,
        run_id="run",
        machine_id="m",
        hostname="h",
        device="cpu",
        device_name="cpu",
        workload="attention",
        case_id=case.case_id,
        build=0,
        status=status,
    )
    if status == "ok":
        row.update(
            median_s=0.01,
            samples_s=[0.01],
            tflops=tflops,
            measured_peak_tflops=2.0,
            measured_peak_n=1024,
            pct_of_measured_peak=50 * tflops,
        )
    else:
        row["reason"] = (
            f"sdpa backend {backend} cannot run this case on cpu: RuntimeError: no kernel"
        )
    return row


def test_the_report_shows_the_section_its_plot_and_summary_rows_after_the_micro_benchmarks(
    tmp_path: Path,
) -> None:
    writer = ResultsWriter(tmp_path, "run")
    matmul = {
        "schema_version": SCHEMA_VERSION,
        "run_id": "run",
        "machine_id": "m",
        "hostname": "h",
        "device": "cpu",
        "device_name": "cpu",
        "workload": "matmul",
        "case_id": "matmul/bf16-n64",
        "dtype": "bf16",
        "size": 64,
        "build": 0,
        "status": "ok",
        "median_s": 2 * 64**3 / 2e12,
        "samples_s": [2 * 64**3 / 2e12],
        "tflops": 2.0,
    }
    for row in (
        matmul,
        attention_row("fwd", "flash", 1.5),
        attention_row("fwd", "math", 0.5),
        attention_row("fwd_bwd", "flash", 1.0),
        attention_row("fwd", "cudnn", 0.0, "skipped"),
    ):
        writer.append(row)
    writer.close()
    text = build_report([tmp_path / "run.csv"], tmp_path / "out", None).read_text(encoding="utf-8")
    summary = text.split("## Summary")[1].split("\n## ")[0]
    assert (
        "| attention forward, best | 1.5 TFLOP/s, 75% of its build's bf16 matmul (2 TFLOP/s) "
        "(bf16 flash s512) (95% "
    ) in summary
    assert summary.index("matmul bf16, best") < summary.index("attention forward, best")
    assert summary.index("attention forward, best") < summary.index("attention fwd+bwd")
    assert summary.index("attention fwd+bwd") < summary.index("flagged · not ok rows")
    section = text.split("## Attention (scaled_dot_product_attention)")[1].split("\n## ")[0]
    assert (
        "![attention](attention.png)" in section
        and (tmp_path / "out" / "attention.png").stat().st_size > 0
    )
    assert "sdpa backend cudnn cannot run this case on cpu" in text.split("## Rows not ok")[1]


@pytest.mark.parametrize("reduced", [False, True])
def test_every_backend_of_a_dtype_is_set_against_that_dtypes_matmul(
    monkeypatch: pytest.MonkeyPatch, reduced
) -> None:
    """torch's math backend upcasts bf16 and fp16 to fp32 unless reduced-precision math is allowed:
    its fraction is still of the bf16 matmul, as flash's is (one denominator per dtype: the
    fractions order as the TFLOP/s do), and the row says it computed in fp32."""
    asked = []
    monkeypatch.setattr(
        attention,
        "measured_peak",
        lambda dtype, ctx: asked.append(dtype) or MatmulPeak(tflops=1.0, n=64),
    )
    monkeypatch.setattr(
        torch.backends.cuda, "fp16_bf16_reduction_math_sdp_allowed", lambda: reduced
    )
    run = RunContext(ctx(profile=Profile.SMOKE), {}, None)
    row = run_with(tiny(dtype="bf16"), attention.WORKLOAD, FakeBenchmark([0.002]), run)
    assert row["status"] == "ok" and asked == ["bf16"]
    assert (
        "the math backend computes bf16 in fp32 (torch upcasts it); % is of the bf16 matmul"
        in str(row["reason"])
    ) == (not reduced)
    # the plot says it
    assert plots.axis_label("pct_of_measured_peak") == "% of this machine's matmul, same dtype"
    # a fused kernel computes in its dtype
    assert attention.computes_in(tiny(dtype="bf16", backend="flash")) == "bf16"


def test_an_older_runs_upcast_math_rows_are_set_against_their_own_dtypes_matmul(
    tmp_path: Path,
) -> None:
    """A run made before every backend was set against its dtype's matmul put bf16 math (0.0401
    TFLOP/s) at 55.9% of the fp32 matmul and bf16 flash (0.0524) at 26.7% of the bf16 one: the
    report sets both against the bf16 one, so the plot and the summary order them as their
    TFLOP/s."""
    writer = ResultsWriter(tmp_path, "run")
    for backend, tflops, peak in (("flash", 0.0524, 0.196), ("math", 0.0401, 0.0717)):
        row = attention_row("fwd", backend, tflops)
        row.update(measured_peak_tflops=peak, pct_of_measured_peak=100 * tflops / peak)
        writer.append(row)
    writer.close()
    text = build_report([tmp_path / "run.csv"], tmp_path / "out", None).read_text(encoding="utf-8")
    section = text.split("## Attention (scaled_dot_product_attention)")[1].split("\n## ")[0]
    math_row = next(line for line in section.splitlines() if "| math |" in line)
    # 0.0401 / 0.196
    assert "20.5" in math_row and "55.9" not in math_row, math_row
