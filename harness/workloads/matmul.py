"""Square matmul TFLOP/s over a size ladder and dtypes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from gpubench.harness.measurement.cases import Case, CaseSkipped
from gpubench.harness.catalog.matmul import SPEC
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.devices.device import dtype_skip_reason
from gpubench.harness.measurement.loop import time_call
from gpubench.harness.measurement.measure import Timed
from gpubench.harness.budget.cost_model import Work
from gpubench.harness.measurement.workload import Workload
from gpubench.harness.workloads.common.matmuls import (
    TORCH_DTYPES,
    cpu_computes_natively,
    device_name,
    operands,
    tflops_figures,
    with_precision,
)

DTYPES = ("fp32", "tf32", "fp16", "bf16")

# Sizes per profile and device kind: a 2-core CPU cannot do 8192³ in fp16 within a quick run.
LADDERS: dict[tuple[str, str], tuple[int, ...]] = {
    ("smoke", "cpu"): (64,),
    ("quick", "cpu"): (512, 1024, 2048),
    ("full", "cpu"): (256, 512, 1024, 2048, 4096),
    ("smoke", "gpu"): (256,),
    ("quick", "gpu"): (1024, 2048, 4096, 8192),
    ("full", "gpu"): (256, 512, 1024, 2048, 4096, 8192, 16384),
}


@dataclass(frozen=True)
class MatmulCase(Case):
    workload: ClassVar[str] = "matmul"
    dtype: str
    size: int


# A CPU without a native kernel for a dtype emulates it, slower the larger n (bf16 here: 1.2 GFLOP/s
# at n=512, 0.93 at 1024, 0.26 at 2048: 65 s for one product, against 0.1 s in fp32), so that
# dtype's ladder stops where one call still takes well under a second; a native one (AVX-512 bf16,
# AMX) climbs the whole ladder.
CPU_EMULATED_MAX_N = {"smoke": 64, "quick": 512, "full": 1024}


def ladder(profile: str, device: torch.device, dtype: str = "fp32") -> tuple[int, ...]:
    sizes = LADDERS[(profile, "cpu" if device.type == "cpu" else "gpu")]
    if device.type == "cpu" and not cpu_computes_natively(dtype):
        sizes = tuple(n for n in sizes if n <= CPU_EMULATED_MAX_N[profile]) or sizes[:1]
    return sizes


def cases(ctx: BuildContext) -> list[MatmulCase]:
    return [
        MatmulCase(dtype, n) for dtype in DTYPES for n in ladder(ctx.profile, ctx.device, dtype)
    ]


def set_up(case: MatmulCase, ctx: BuildContext) -> Timed:
    if reason := dtype_skip_reason(ctx.device, case.dtype):
        raise CaseSkipped(reason)
    restore = with_precision(case.dtype)
    a, b, out = operands(case.size, case.dtype, ctx.device)
    return Timed(
        fn=lambda: torch.matmul(a, b, out=out),
        figures=tflops_figures(case.size, case.dtype, device_name(ctx.device)),
        cleanup=restore,
        estimate=lambda: call_estimate_s(case.size, case.dtype, ctx),
    )


# the probe's n is this much smaller: its call is PROBE_SHRINK**3 times cheaper
PROBE_SHRINK = 4


def call_estimate_s(n: int, dtype: str, ctx: BuildContext) -> float:
    """One n x n call's seconds, from a call at n / PROBE_SHRINK scaled by the FLOPs: a bf16 call
    that takes half a minute where the CPU has no bf16 kernel is known before it starts."""
    small = max(1, n // PROBE_SHRINK)
    a, b, out = operands(small, dtype, ctx.device)
    # one-time costs (library init) are not the call's
    torch.matmul(a, b, out=out)
    return time_call(lambda: torch.matmul(a, b, out=out), ctx.clock) * (n / small) ** 3


def headline(cases: list[MatmulCase]) -> list[MatmulCase]:
    """Each dtype's largest size: the summary's matmul row per dtype."""
    return [
        max((c for c in cases if c.dtype == dtype), key=lambda c: c.size)
        for dtype in dict.fromkeys(c.dtype for c in cases)
    ]


def work(case: MatmulCase, ctx: BuildContext) -> Work:
    size = TORCH_DTYPES[case.dtype].itemsize
    return Work(
        flops=2 * case.size**3,
        dtype=case.dtype,
        bytes=3 * case.size**2 * size,
        random_values=2 * case.size**2,
        fresh_bytes=3 * case.size**2 * size,
    )


WORKLOAD = Workload(SPEC, cases, set_up, headline, work)
