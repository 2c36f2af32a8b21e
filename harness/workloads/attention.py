"""`F.scaled_dot_product_attention` per backend, forward and forward+backward, causal and not, over
sequence lengths: TFLOP/s and its fraction of this build's own matmul in the same dtype (a roofline
that does not trust datasheets)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, ClassVar
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel

from gpubench.harness.devices import device as devices
from gpubench.harness.measurement.cases import Case, CaseSkipped
from gpubench.harness.catalog.attention import SPEC
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.devices.device import dtype_skip_reason
from gpubench.harness.measurement.measure import Measurement, Timed
from gpubench.harness.core.stats import SampleStats
from gpubench.harness.measurement.terminal import one_line, torch_said
from gpubench.harness.budget.cost_model import Work
from gpubench.harness.measurement.workload import Workload
from gpubench.harness.workloads.common.gpt import SDPA_BACKENDS
from gpubench.harness.workloads.common.matmuls import TORCH_DTYPES, with_precision
from gpubench.harness.workloads.common.matmul_peak import measured_peak

OPS = ("fwd", "fwd_bwd")
# fp16 has no fast CPU kernels
DTYPES = {"cpu": ("fp32", "bf16"), "gpu": ("fp32", "bf16", "fp16")}


@dataclass(frozen=True)
class _Shape:
    heads: int
    head_dim: int
    # batch × sequence length per call, kept constant over the ladder (batch = tokens / length)
    tokens: int


# On a GPU flash-attention's benchmark shape (model width 2048 as 16 heads of 128, 16k tokens a
# call); on a CPU a few ms to a few hundred ms a call.
SHAPES = {
    "cpu": _Shape(heads=4, head_dim=64, tokens=256),
    "gpu": _Shape(heads=16, head_dim=128, tokens=16384),
}
LADDERS: dict[tuple[str, str], tuple[int, ...]] = {
    ("smoke", "cpu"): (64,),
    ("quick", "cpu"): (64, 256),
    ("full", "cpu"): (64, 128, 256, 512, 1024),
    ("smoke", "gpu"): (256,),
    ("quick", "gpu"): (1024, 4096, 16384),
    ("full", "gpu"): (512, 1024, 2048, 4096, 8192, 16384),
}
# bf16 on a CPU: the shortest length only in quick, for its budget (its backward runs 0.1-0.3 s a
# call here).
CPU_REDUCED_LADDERS = {"smoke": (64,), "quick": (64,), "full": (64, 128, 256, 512)}


@dataclass(frozen=True)
class AttentionCase(Case):
    workload: ClassVar[str] = "attention"
    dtype: str
    # fwd, fwd_bwd
    op: str
    sdpa_backend: str
    causal: bool
    seq_len: int
    batch_size: int
    heads: int
    head_dim: int


def kind(device: torch.device) -> str:
    return "cpu" if device.type == "cpu" else "gpu"


def ladder(profile: str, device: torch.device, dtype: str) -> tuple[int, ...]:
    if device.type == "cpu" and dtype != "fp32":
        return CPU_REDUCED_LADDERS[str(profile)]
    return LADDERS[(str(profile), kind(device))]


def cases(ctx: BuildContext) -> list[AttentionCase]:
    shape = SHAPES[kind(ctx.device)]
    return [
        AttentionCase(
            dtype,
            op,
            backend,
            causal,
            seq,
            max(1, shape.tokens // seq),
            shape.heads,
            shape.head_dim,
        )
        for dtype in DTYPES[kind(ctx.device)]
        for op in OPS
        for backend in SDPA_BACKENDS
        for causal in (False, True)
        for seq in ladder(ctx.profile, ctx.device, dtype)
    ]


# flash-attention's count (Dao-AILab/flash-attention, benchmarks/benchmark_flash_attention.py,
# `flops`): a backward costs 2.5 forwards — its four products plus the recomputation of Q·Kᵀ.
BACKWARD_OVER_FORWARD = 2.5


def attention_flops(
    batch: int, heads: int, seq_len: int, head_dim: int, causal: bool, op: str
) -> float:
    """Q·Kᵀ and P·V are 2·B·H·S²·D each, half of it under a causal mask; fwd_bwd adds 2.5× the
    forward."""
    if op not in OPS:
        raise ValueError(f"unknown attention op {op!r}: use one of {', '.join(OPS)}")
    forward = 4 * batch * heads * seq_len**2 * head_dim / (2 if causal else 1)
    return forward if op == "fwd" else forward * (1 + BACKWARD_OVER_FORWARD)


def case_tflops(case: AttentionCase, seconds: float) -> float:
    flops = attention_flops(
        case.batch_size, case.heads, case.seq_len, case.head_dim, case.causal, case.op
    )
    return flops / seconds / 1e12


Attend = Callable[..., torch.Tensor]


def backend_skip_reason(
    case: AttentionCase, device: torch.device, attend: Attend = F.scaled_dot_product_attention
) -> str | None:
    """Why the backend cannot run the case here, from one call at batch 1 and one head; None when it
    ran. torch warns why it refused each fused kernel before it raises: those warnings are the
    reason."""
    q = torch.randn(
        1,
        1,
        case.seq_len,
        case.head_dim,
        device=device,
        dtype=TORCH_DTYPES[case.dtype],
        requires_grad=case.op == "fwd_bwd",
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with sdpa_kernel(SDPA_BACKENDS[case.sdpa_backend]):
                out = attend(q, q, q, is_causal=case.causal)
                if case.op == "fwd_bwd":
                    torch.autograd.grad(out, q, torch.ones_like(out))
            # a kernel that fails on the device raises here, not in the rounds
            devices.synchronize(device)
        except RuntimeError as error:
            said = list(dict.fromkeys(torch_said(w.message) for w in caught))
            said.append(one_line(error))
            return (
                f"sdpa backend {case.sdpa_backend} cannot run this case on {device.type}: "
                + "; ".join(said)
            )
    return None


def attention_call(
    case: AttentionCase, device: torch.device, attend: Attend = F.scaled_dot_product_attention
) -> Callable[[], Any]:
    """The forward (no autograd graph), or the forward and q, k, v's gradients for a fixed upstream
    gradient (returned, never accumulated into .grad)."""
    gen = devices.seeded_generator(device, 0)
    shape = (case.batch_size, case.heads, case.seq_len, case.head_dim)
    grad = case.op == "fwd_bwd"
    dtype = TORCH_DTYPES[case.dtype]
    q, k, v = (devices.randn_on(shape, device, dtype, gen).requires_grad_(grad) for _ in range(3))
    backend = SDPA_BACKENDS[case.sdpa_backend]
    if not grad:

        def forward() -> torch.Tensor:
            with sdpa_kernel(backend):
                return attend(q, k, v, is_causal=case.causal)

        return forward
    upstream = devices.randn_on(shape, device, dtype, gen)

    def forward_backward() -> tuple[torch.Tensor, ...]:
        with sdpa_kernel(backend):
            return torch.autograd.grad(attend(q, k, v, is_causal=case.causal), (q, k, v), upstream)

    return forward_backward


def computes_in(case: AttentionCase) -> str:
    """torch's math backend upcasts fp16 and bf16 to fp32 unless
    allow_fp16_bf16_reduction_math_sdp(True)."""
    upcast = case.sdpa_backend == "math" and case.dtype != "fp32"
    return (
        "fp32"
        if upcast and not torch.backends.cuda.fp16_bf16_reduction_math_sdp_allowed()
        else case.dtype
    )


def roofline(case: AttentionCase, ctx: BuildContext) -> Callable[[Measurement], dict[str, Any]]:
    """The companion: this build's matmul in the case's dtype, and the case's fraction of it. Every
    backend of a dtype is set against the one matmul, so their fractions compare as their TFLOP/s do
    (the math backend's upcast to fp32 is said, not hidden in another denominator)."""

    def companion(measured: Measurement) -> dict[str, Any]:
        dtype = case.dtype
        peak = measured_peak(dtype, ctx)
        pct = 100 * case_tflops(case, measured.stats.median_s) / peak.tflops
        out: dict[str, Any] = {
            "measured_peak_tflops": peak.tflops,
            "measured_peak_n": peak.n,
            "pct_of_measured_peak": pct,
        }
        notes = []
        if computes_in(case) != dtype:
            notes.append(
                f"the math backend computes {dtype} in fp32 (torch upcasts it); % is of the "
                f"{dtype} matmul, as every backend's"
            )
        if pct > 100:
            notes.append(
                f"{pct:.0f}% of this build's {dtype} matmul (n={peak.n}): the kernel computes "
                f"faster than torch.matmul in {dtype} here"
            )
        if notes:
            out["reason"] = "; ".join(notes)
        return out

    return companion


def set_up(case: AttentionCase, ctx: BuildContext) -> Timed:
    if reason := dtype_skip_reason(ctx.device, case.dtype) or backend_skip_reason(case, ctx.device):
        raise CaseSkipped(reason)
    # fp32 is IEEE fp32: the math backend's products use no TF32
    restore = with_precision(case.dtype)

    def figures(stats: SampleStats, _result: Any) -> dict[str, Any]:
        return {"tflops": case_tflops(case, stats.median_s), "latency_s": stats.median_s}

    return Timed(
        fn=attention_call(case, ctx.device),
        figures=figures,
        companion=roofline(case, ctx),
        cleanup=restore,
    )


def headline(cases: list[AttentionCase]) -> list[AttentionCase]:
    """Per op, the flash backend unmasked at the longest sequence (bf16 where it runs): the
    summary's rows."""

    def rank(c: AttentionCase) -> tuple[bool, bool, bool, int]:
        return c.sdpa_backend == "flash", not c.causal, c.dtype == "bf16", c.seq_len

    return [
        max((c for c in cases if c.op == op), key=rank)
        for op in OPS
        if any(c.op == op for c in cases)
    ]


# The share of the probed matmul rate attention reaches (measured: 10-64% on a 2-core CPU, 60-75% on
# an H200).
ATTENTION_EFFICIENCY = 0.3


def work(case: AttentionCase, ctx: BuildContext) -> Work:
    return Work(
        flops=attention_flops(
            case.batch_size, case.heads, case.seq_len, case.head_dim, case.causal, case.op
        ),
        dtype=case.dtype,
        efficiency=ATTENTION_EFFICIENCY,
        launches=5 if case.op == "fwd" else 15,
        random_values=3 * case.batch_size * case.heads * case.seq_len * case.head_dim,
    )


WORKLOAD = Workload(SPEC, cases, set_up, headline, work)
