"""transformer: the case ladder, the FLOP count against torch's own counter, the attention backend
actually used, skipped settings with reasons, the falling-loss guard and a run end to end."""

from __future__ import annotations

import csv
import json
import subprocess
import warnings
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

from runs import GPUBENCH, summary_as_quick
from gpubench.harness.measurement.cases import CaseSkipped, Diverged
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.measurement.measure import Timed
from gpubench.harness.core.peaks import peak_tflops
from gpubench.harness.catalog.profiles import Profile
from gpubench.harness.core.stats import summarize
from gpubench.harness.measurement.timing import SyncedClock
from gpubench.harness.workloads import transformer
from gpubench.harness.workloads.common import gpt
from gpubench.harness.workloads.transformer import TransformerCase, base_case

ROOT = Path(__file__).resolve().parent.parent
CPU = torch.device("cpu")
TINY = gpt.CONFIGS["tiny"]


def ctx(device: str = "cpu", profile: Profile = Profile.SMOKE) -> BuildContext:
    return BuildContext(torch.device(device), profile, SyncedClock(CPU))


def tiny_model(backend: str = "math") -> gpt.GPT:
    return gpt.GPT(TINY, gpt.SDPA_BACKENDS[backend])


def test_the_cpu_smoke_profile_sweeps_every_setting_of_tiny() -> None:
    cases = transformer.cases(ctx())
    assert {c.model for c in cases} == {"tiny"}
    assert {c.precision for c in cases} == {"fp32", "bf16"} and {c.compile_mode for c in cases} == {
        "none",
        "default",
    }
    assert {c.sdpa_backend for c in cases} == {"math", "flash", "efficient", "cudnn"}
    assert {c.optimizer for c in cases} == {"adamw", "adamw-fused"}
    assert (
        cases[0].case_id == "transformer/tiny-fp32-math"
        and cases[0].batch_size == 8
        and cases[0].seq_len == 64
    )
    assert "transformer/tiny-fp32-compile-default-math" in [c.case_id for c in cases]


def test_the_cpu_quick_profile_leaves_the_cold_compile_out_and_a_gpu_adds_gpt2() -> None:
    quick = transformer.cases(ctx(profile=Profile.QUICK))
    assert {c.compile_mode for c in quick} == {"none"} and len(quick) == 6
    # only the device's type is read: no GPU needed
    gpu = transformer.cases(ctx("cuda", Profile.QUICK))
    gpt2 = [c for c in gpu if c.model == "gpt2-125m"]
    assert "gpt2-125m-bf16-flash-adamw-fused" in [c.test_id for c in gpt2]
    assert {c.compile_mode for c in gpt2} == {"none", "default"} and {
        c.precision for c in gpt2
    } == {"fp32", "bf16"}
    # no case twice
    assert len({c.case_id for c in gpu}) == len(gpu)
    # the GPU check's smoke step
    assert not [c for c in transformer.cases(ctx("cuda")) if c.compile_mode != "none"]


def test_flops_per_token_is_six_n_plus_the_attention_term() -> None:
    # 6·N + 12·L·H·Q·T with N=1000, L=2, H=3, Q=4, T=5
    assert gpt.flops_per_token(1000, 2, 3, 4, 5) == 6000 + 12 * 2 * 3 * 4 * 5


def test_n_counts_every_weight_but_the_position_embedding_and_the_tied_head_once() -> None:
    model = tiny_model()
    d, layers = TINY.d_model, TINY.n_layer
    # qkv 3d², proj d², MLP 8d², two LayerNorm weights
    blocks = layers * (12 * d * d + 2 * d)
    # + token embedding (= head) + final LayerNorm
    assert gpt.counted_params(model) == blocks + TINY.vocab_size * d + d
    assert model.head.weight is model.wte.weight


def test_the_flop_formula_agrees_with_torchs_flop_counter() -> None:
    """Forward and backward of one batch, counted by FlopCounterMode (every matmul, and attention's
    through the math backend: it runs as matmuls; the CPU flash kernel has no entry in its
    table)."""
    model = tiny_model("math")
    tokens, targets = gpt.token_batches(TINY, CPU, 1)[0]
    with FlopCounterMode(display=False) as counter:
        model(tokens, targets).backward()
    counted = counter.get_total_flops()
    formula = gpt.flops_per_token(
        gpt.counted_params(model), TINY.n_layer, TINY.n_head, TINY.head_dim, TINY.seq_len
    )
    assert formula * TINY.tokens_per_step == pytest.approx(counted, rel=0.03)


def test_the_token_stream_is_learnable_and_shifted() -> None:
    batches = gpt.token_batches(TINY, CPU, 3, seed=1)
    following: dict[int, int] = {}
    for tokens, targets in batches:
        assert tokens.shape == (TINY.batch_size, TINY.seq_len) and torch.equal(
            tokens[:, 1:], targets[:, :-1]
        )
        for now, after in zip(tokens.flatten().tolist(), targets.flatten().tolist()):
            # the next token is a function of this one
            assert following.setdefault(now, after) == after


@pytest.mark.parametrize(
    ("backend", "kernel"),
    [
        ("math", "aten::_scaled_dot_product_attention_math"),
        ("flash", "aten::_scaled_dot_product_flash_attention_for_cpu"),
    ],
)
def test_the_model_runs_the_attention_backend_it_names(backend: str, kernel: str) -> None:
    model = tiny_model(backend)
    tokens, targets = gpt.token_batches(TINY, CPU, 1)[0]
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        model(tokens, targets)
    ops = {event.key for event in prof.key_averages()}
    assert kernel in ops
    kernels = {
        "aten::_scaled_dot_product_attention_math",
        "aten::_scaled_dot_product_flash_attention_for_cpu",
    }
    others = kernels - {kernel}
    assert not others & ops


def test_a_step_that_runs_another_attention_kernel_is_caught() -> None:
    flash = base_case("tiny", "fp32", "flash")
    step = transformer.TransformerStep(flash, CPU)
    assert transformer.attention_mismatch(flash, step) is None
    assert transformer.attention_mismatch(base_case("tiny", "fp32", "math"), step) == (
        "the eager step ran flash attention, not math: the setting did not hold"
    )
    # each check is one training step (a warm-up step in a build)
    assert len(step.losses) == 2


def test_a_backend_the_cpu_cannot_run_is_skipped_with_the_reason() -> None:
    for backend in ("math", "flash"):
        case = replace(base_case("tiny", "fp32", "math"), sdpa_backend=backend)
        assert transformer.backend_skip_reason(case, CPU) is None
    for backend in ("efficient", "cudnn"):
        case = replace(base_case("tiny", "bf16", "math"), sdpa_backend=backend)
        why = f"sdpa backend {backend} cannot run bf16 attention on cpu: No viable backend"
        with pytest.raises(CaseSkipped, match=why):
            transformer.set_up(case, ctx())


def test_torchs_warnings_say_why_a_backend_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on CUDA, where torch warns with each check a backend failed before it raises."""

    def refusing(*args, **kwargs):
        warnings.warn(
            "Flash attention requires q, k, v to have the same last dimension\nand more",
            UserWarning,
            stacklevel=2,
        )
        warnings.warn("Flash attention does not support fp32 inputs", UserWarning, stacklevel=2)
        raise RuntimeError("No available kernel. Aborting execution.")

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", refusing)
    assert transformer.backend_skip_reason(base_case("tiny", "fp32", "flash"), CPU) == (
        "sdpa backend flash cannot run fp32 attention on cpu: Flash attention requires q, k, v to "
        "have the same last dimension; Flash attention does not support fp32 inputs"
    )


def test_the_backend_probe_passes_what_the_model_passes_and_waits_for_the_device(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The model hands sdpa strided views of one qkv projection; a kernel that takes contiguous
    tensors may refuse those, and a kernel that fails on the device raises only at a synchronize."""
    seen, synced = [], []
    real = torch.nn.functional.scaled_dot_product_attention

    def recording(q, k, v, **kwargs):
        seen.append((q.shape, q.stride(), k.data_ptr() != q.data_ptr(), q.is_contiguous()))
        return real(q, k, v, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", recording)
    monkeypatch.setattr(transformer.devices, "synchronize", lambda device: synced.append(device))
    case = base_case("tiny", "fp32", "math")
    assert transformer.backend_skip_reason(case, CPU) is None
    probe_shape, probe_stride, distinct, contiguous = seen[0]
    assert not contiguous and distinct and synced == [CPU]
    config = case.config
    width = config.n_head * config.head_dim
    assert tuple(probe_shape) == (1, config.n_head, config.seq_len, config.head_dim)
    # the model's layout
    assert probe_stride == (config.seq_len * 3 * width, config.head_dim, 3 * width, 1)


def test_a_fused_optimizer_torch_refuses_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    real = torch.optim.AdamW

    def refusing(params, *args, fused=None, **kwargs):
        if fused:
            raise RuntimeError(
                "`fused=True` requires all the params to be floating point Tensors of supported "
                "devices"
            )
        return real(params, *args, **kwargs)

    monkeypatch.setattr(torch.optim, "AdamW", refusing)
    why = r"AdamW\(fused=True\) is not supported on cpu by this torch: `fused=True` requires"
    with pytest.raises(CaseSkipped, match=why):
        transformer.set_up(base_case("tiny", "fp32", "math", "adamw-fused"), ctx())
    # the unfused case never asks
    assert transformer.fused_skip_reason(base_case("tiny", "fp32", "math"), CPU) is None


def test_the_loss_guard() -> None:
    assert transformer.loss_check([5.0, 4.9, 4.8, 4.9, 4.7], period=4) is None
    # lower in between, not on the same batch
    flat = transformer.loss_check([5.0, 4.0, 4.0, 4.0, 5.0], period=4)
    assert "did not fall over 4 timed steps on the same batch (5 -> 5)" in flat
    assert "not finite" in transformer.loss_check([5.0, float("nan"), 4.0, 4.0, 4.0], period=4)
    assert "never came round again" in transformer.loss_check([5.0, 4.0, 3.0], period=4)
    # steps cut by a run budget: too few to see the batch again is no evidence of not training;
    # finiteness still is
    assert transformer.loss_check([5.0, 4.0], period=4, capped=True) is None
    assert "not finite" in transformer.loss_check([5.0, float("inf")], period=4, capped=True)


def run_build(
    case: TransformerCase, profile: Profile = Profile.SMOKE
) -> tuple[Timed, list[torch.Tensor]]:
    timed = transformer.set_up(case, ctx(profile=profile))
    rounds = transformer.STEPS[str(profile)][1]
    results = [timed.fn() for _ in range(rounds)]
    return timed, results


def test_a_step_trains_and_its_figures_count_tokens_and_flops() -> None:
    case = base_case("tiny", "fp32", "math")
    timed, results = run_build(case)
    try:
        figures = timed.figures(summarize([0.5] * 5), None)
    finally:
        timed.cleanup()
    assert figures["tokens_per_s"] == TINY.tokens_per_step / 0.5 and figures["step_s"] == 0.5
    flops = gpt.flops_per_token(figures["n_params"], 2, 2, 32, 64) * TINY.tokens_per_step
    assert figures["tflops"] == pytest.approx(flops / 0.5 / 1e12)
    # no datasheet peak for a CPU
    assert figures["mfu"] is None and figures["peak_tflops"] is None
    # the last timed step's loss, not a warm-up step's
    assert figures["train_loss"] == pytest.approx(results[-1].detach().item())
    # below ln(256): it learned
    assert 0 < figures["train_loss"] < 5.6


def test_mfu_divides_by_the_datasheet_peak_of_the_precision() -> None:
    figures = transformer.model_figures(
        base_case("tiny", "bf16", "flash"), 1000, 0.25, "NVIDIA H200"
    )
    assert figures["peak_tflops"] == 989.4 and figures["mfu"] == pytest.approx(
        figures["tflops"] / 989.4
    )
    fp32 = transformer.model_figures(base_case("tiny", "fp32", "flash"), 1000, 0.25, "NVIDIA H200")
    assert fp32["peak_tflops"] == 66.9


def test_without_a_datasheet_peak_mfu_is_against_this_builds_measured_matmul() -> None:
    from types import SimpleNamespace

    from gpubench.harness.workloads.common.matmul_peak import measured_peak

    case, build_ctx = base_case("tiny", "fp32", "math"), ctx()
    timed = transformer.set_up(case, build_ctx)
    try:
        # a CPU has no datasheet peak
        assert timed.companion is not None
        columns = timed.companion(SimpleNamespace(stats=summarize([0.5] * 5)))
    finally:
        timed.cleanup()
    peak = measured_peak("fp32", build_ctx)
    assert columns["measured_peak_tflops"] == peak.tflops and columns["measured_peak_n"] == peak.n
    tflops = (
        gpt.flops_per_token(gpt.counted_params(tiny_model()), 2, 2, 32, 64)
        * TINY.tokens_per_step
        / 0.5
        / 1e12
    )
    assert columns["mfu"] == pytest.approx(tflops / peak.tflops)


def test_a_step_that_does_not_train_is_a_failed_row(monkeypatch: pytest.MonkeyPatch) -> None:
    # AdamW with a zero rate moves nothing
    monkeypatch.setitem(gpt.CONFIGS, "tiny", replace(TINY, lr=0.0))
    timed, _ = run_build(base_case("tiny", "fp32", "math"))
    try:
        with pytest.raises(
            Diverged, match="the loss did not fall over 4 timed steps on the same batch"
        ):
            timed.figures(summarize([0.5] * 5), None)
    finally:
        timed.cleanup()


def test_fp32_matmuls_are_ieee_for_the_case_and_restored() -> None:
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        timed = transformer.set_up(base_case("tiny", "fp32", "math"), ctx())
        assert torch.get_float32_matmul_precision() == "highest"
        timed.cleanup()
        assert torch.get_float32_matmul_precision() == "high"
    finally:
        torch.set_float32_matmul_precision(before)


def test_a_compiled_case_compiles_the_model_only() -> None:
    step = transformer.TransformerStep(
        replace(base_case("tiny", "fp32", "math"), compile_mode="default"), CPU
    )
    # not called: nothing compiles here
    assert step.forward is not step.model and getattr(step.forward, "_orig_mod", None) is step.model


@pytest.mark.process
def test_a_run_writes_its_rows_summary_and_section(tmp_path: Path) -> None:
    """The whole path once, in the processes gpubench runs (the compiled case left out: a cold
    compile takes 20 s to 2 minutes on a 2-core CPU)."""
    done = subprocess.run(
        [
            *GPUBENCH,
            "run",
            "--device",
            "cpu",
            "--profile",
            "smoke",
            "-k",
            "transformer and not compile",
            "--results-dir",
            str(tmp_path),
            "--run-id",
            "gpt",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    with open(tmp_path / "gpt.csv", newline="", encoding="utf-8") as handle:
        rows = {r["case_id"]: r for r in csv.DictReader(handle)}
    skipped = {k for k, r in rows.items() if r["status"] == "skipped"}
    assert skipped == {"transformer/tiny-fp32-efficient", "transformer/tiny-fp32-cudnn"}
    ok = [r for r in rows.values() if r["status"] == "ok"]
    # no datasheet peak for a CPU: MFU against this build's own matmul in the case's precision
    assert len(ok) == 4 and all(
        float(r["tokens_per_s"]) > 0 and float(r["measured_peak_tflops"]) > 0 for r in ok
    )
    assert all(0 < float(r["mfu"]) and r["peak_tflops"] == "" for r in ok)
    # a sample per timed step
    assert all(len(json.loads(r["samples_s"])) == 5 for r in ok)
    report = (tmp_path / "gpt-report" / "report.md").read_text(encoding="utf-8")
    assert "## Transformer training step (GPT-style decoder)" in report
    assert "| tiny | bf16 | none | math | adamw |" in report
    assert "Smoke-profile rows only" in report.split("## Summary")[1].split("\n## ")[0]
    assert "| tiny transformer step, fastest | " in summary_as_quick(
        tmp_path / "gpt.csv", tmp_path / "as-quick"
    )
    assert (tmp_path / "gpt-report" / "transformer.png").stat().st_size > 0


@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs CUDA: torch.cuda.is_available() is False"
)
def test_a_gpu_runs_each_backend_it_can_and_names_why_not_the_rest() -> None:
    gpu = torch.device("cuda", 0)
    context = BuildContext(gpu, Profile.SMOKE, SyncedClock(gpu))
    outcome: dict[str, object] = {}
    for backend in gpt.SDPA_BACKENDS:
        try:
            timed = transformer.set_up(base_case("tiny", "bf16", backend, "adamw-fused"), context)
        except CaseSkipped as skipped:
            outcome[backend] = str(skipped)
            continue
        try:
            for _ in range(transformer.STEPS["smoke"][1]):
                timed.fn()
            outcome[backend] = timed.figures(summarize([0.01] * 5), None)
        finally:
            timed.cleanup()
    assert isinstance(outcome["math"], dict)
    for backend, result in outcome.items():
        assert (
            isinstance(result, dict)
            or f"sdpa backend {backend} cannot run bf16 attention on cuda" in result
        ), result
    if peak_tflops(torch.cuda.get_device_name(gpu), "bf16"):
        assert outcome["math"]["mfu"] > 0
    fp32_flash = transformer.backend_skip_reason(base_case("tiny", "fp32", "flash"), gpu)
    assert fp32_flash and fp32_flash.startswith(
        "sdpa backend flash cannot run fp32 attention on cuda: "
    ), fp32_flash
