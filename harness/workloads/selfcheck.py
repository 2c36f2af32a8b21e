"""Proves the clock: one matmul timed by the harness, by torch.utils.benchmark and by CUDA events.

The ratios harness/other should sit near 1.0. A harness that forgot to synchronize would read far
below the others on a GPU (e.g. 0.03 ms instead of 1.36 ms), and the row says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.utils.benchmark as tub

from harness.cases import Case
from harness.runner import Timed
from harness.stats import SampleStats, summarize
from harness.timing import cuda_event_samples
from harness.workloads.matmul import device_name, operands, tflops_figures, with_precision

AGREEMENT = (0.8, 1.25)  # ratios outside this band mean one of the clocks is wrong


@dataclass(frozen=True)
class SelfcheckCase(Case):
    workload: ClassVar[str] = "selfcheck"
    dtype: str
    size: int


def cases(profile: str, device: torch.device) -> list[SelfcheckCase]:
    if profile == "smoke":
        return [SelfcheckCase("fp32", 128)]
    return [SelfcheckCase("fp32", 1024 if device.type == "cpu" else 4096)]


def disagreement(name: str, ratio: float | None) -> str | None:
    if ratio is None or AGREEMENT[0] <= ratio <= AGREEMENT[1]:
        return None
    return f"selfcheck: harness/{name} ratio {ratio:.2f} outside {AGREEMENT} — one of the clocks is wrong"


def torch_benchmark_median_s(stmt: Any, min_run_time_s: float) -> float:
    """torch.utils.benchmark.Timer at the harness's thread count (its default of 1 would make
    the comparison meaningless on the CPU); it synchronizes CUDA itself."""
    timer = tub.Timer(stmt="fn()", globals={"fn": stmt}, num_threads=torch.get_num_threads())
    return timer.blocked_autorange(min_run_time=min_run_time_s).median


def build(case: SelfcheckCase, device: torch.device, profile: str) -> Timed:
    restore = with_precision(case.dtype)
    a, b, out = operands(case.size, case.dtype, device)
    fn = lambda: torch.matmul(a, b, out=out)  # noqa: E731
    base = tflops_figures(case.size, case.dtype, device_name(device))

    def figures(stats: SampleStats, result: Any) -> dict[str, Any]:
        tub_ratio = stats.median_s / torch_benchmark_median_s(fn, max(0.2, stats.median_s * 10))
        events_ratio = None
        if device.type == "cuda":
            iterations = max(1, int(1e-3 / stats.median_s))
            events_ratio = stats.median_s / summarize(cuda_event_samples(fn, iterations, 20)).median_s
        problems = [p for p in (disagreement("torch.utils.benchmark", tub_ratio), disagreement("cuda-events", events_ratio)) if p]
        return dict(base(stats, result), selfcheck_tub_ratio=tub_ratio, selfcheck_events_ratio=events_ratio, reason="; ".join(problems))

    return Timed(fn=fn, figures=figures, cleanup=restore)
