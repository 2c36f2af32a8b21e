"""The GPU-over-CPU check: n=5000 fp32 matmul on the CPU against the GPU, with the speedup."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from gpubench.harness.measurement.cases import Case, CaseSkipped
from gpubench.harness.catalog.matmul_speedup import SPEC
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.measurement.measure import Measurement, Timed, measure
from gpubench.harness.core.plan import BuildTiming
from gpubench.harness.catalog.profiles import Profile
from gpubench.harness.measurement.timing import SyncedClock
from gpubench.harness.measurement.workload import Workload
from gpubench.harness.workloads.common.matmuls import (
    device_name,
    operands,
    tflops_figures,
    with_precision,
)

GUIDE_N = 5000


@dataclass(frozen=True)
class SpeedupCase(Case):
    workload: ClassVar[str] = "matmul_speedup"
    dtype: str
    size: int


def cases(ctx: BuildContext) -> list[SpeedupCase]:
    return [SpeedupCase("fp32", 512 if ctx.profile == "smoke" else GUIDE_N)]


def cpu_timing(profile: str) -> BuildTiming:
    # Each CPU call of n=5000 takes about a second on a few cores: a handful of rounds is enough.
    return BuildTiming(
        target_s=Profile(profile).timing.target_s * 4,
        min_round_s=0.0,
        min_rounds=3,
        max_rounds=10,
        warmup_calls=1,
    )


def set_up(case: SpeedupCase, ctx: BuildContext) -> Timed:
    device, profile = ctx.device, ctx.profile
    if device.type == "cpu":
        raise CaseSkipped("the CPU-vs-GPU speedup needs an accelerator; --device is cpu")
    restore = with_precision(case.dtype)
    a, b, out = operands(case.size, case.dtype, device)
    a_cpu, b_cpu, out_cpu = operands(case.size, case.dtype, torch.device("cpu"))
    gpu_figures = tflops_figures(case.size, case.dtype, device_name(device))

    def cpu_side(measured: Measurement) -> dict[str, Any]:
        """The same product on the CPU after the device's rounds, on a CPU-synced clock (no device
        queue waits)."""
        cpu_clock = SyncedClock(torch.device("cpu"), ctx.clock.base)
        cpu = measure(
            Timed(fn=lambda: torch.matmul(a_cpu, b_cpu, out=out_cpu)),
            cpu_timing(profile),
            cpu_clock,
        )
        return {
            "baseline_median_s": cpu.stats.median_s,
            "speedup": cpu.stats.median_s / measured.stats.median_s,
        }

    return Timed(
        fn=lambda: torch.matmul(a, b, out=out),
        figures=gpu_figures,
        companion=cpu_side,
        cleanup=restore,
    )


WORKLOAD = Workload(SPEC, cases, set_up)
