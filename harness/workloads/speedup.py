"""The guide's §3.3 check: n=5000 fp32 matmul on the CPU against the GPU, with the speedup."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from harness.cases import BUDGETS, Case, CaseSkipped
from harness.runner import BuildContext, Timed
from harness.stats import SampleStats, summarize
from harness.timing import Budget, SyncedClock, measure
from harness.workloads.matmul import device_name, operands, tflops_figures, with_precision

GUIDE_N = 5000
MARKERS = ("gpu",)


@dataclass(frozen=True)
class SpeedupCase(Case):
    workload: ClassVar[str] = "matmul_speedup"
    dtype: str
    size: int


# One build: the CPU side alone takes seconds per call, and the figure is a ratio within the build.
BUILDS = {"smoke": 1, "quick": 1, "full": 3}


def cases(ctx: BuildContext) -> list[SpeedupCase]:
    return [SpeedupCase("fp32", 512 if ctx.profile == "smoke" else GUIDE_N)]


def cpu_budget(profile: str) -> Budget:
    # Each CPU call of n=5000 takes about a second on a few cores: a handful of rounds is enough.
    return Budget(target_s=BUDGETS[profile].target_s * 4, min_round_s=0.0, min_rounds=3, max_rounds=10, warmup_calls=1)


def build(case: SpeedupCase, ctx: BuildContext) -> Timed:
    device, profile = ctx.device, ctx.profile
    if device.type == "cpu":
        raise CaseSkipped("the CPU-vs-GPU speedup needs an accelerator; --device is cpu")
    restore = with_precision(case.dtype)
    a, b, out = operands(case.size, case.dtype, device)
    a_cpu, b_cpu, out_cpu = operands(case.size, case.dtype, torch.device("cpu"))
    gpu_figures = tflops_figures(case.size, case.dtype, device_name(device))

    def figures(stats: SampleStats, result: Any) -> dict[str, Any]:
        cpu_clock = SyncedClock(torch.device("cpu"), ctx.clock.base)
        _, cpu_samples = measure(lambda: torch.matmul(a_cpu, b_cpu, out=out_cpu), cpu_budget(profile), cpu_clock)
        cpu_median_s = summarize(cpu_samples).median_s
        return dict(gpu_figures(stats, result), baseline_median_s=cpu_median_s, speedup=cpu_median_s / stats.median_s)

    return Timed(fn=lambda: torch.matmul(a, b, out=out), figures=figures, cleanup=restore)
