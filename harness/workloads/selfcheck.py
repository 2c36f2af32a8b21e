"""Proves the clock: a matmul timed by the harness's clock (the one pytest-benchmark uses,
including a --benchmark-timer underneath it), by torch.utils.benchmark and, on CUDA, by CUDA
events — interleaved, so both see the same machine state.

Each pair is one harness window and one torch.utils.benchmark window of the same number of calls;
the row's ratio is the median over the pairs. Outside AGREEMENT the row fails: one of the clocks is
wrong (a harness that forgot to synchronize reads far below the others on a GPU, e.g. 0.03 ms
instead of 1.36 ms; a biased host clock reads its bias). A short case (~100 µs a call) and a long
one cover both launch-bound and compute-bound regions.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import torch
import torch.utils.benchmark as tub

from harness.cases import Case
from harness.catalog.selfcheck import SPEC
from harness.context import BuildContext
from harness.machine_load import BUSY_FRAC, LoadMeter
from harness.measure import Measurement, Timed
from harness.timing import Clock, cuda_event_samples
from harness.workload import Workload
from harness.workloads.matmul import device_name, operands, tflops_figures, with_precision

AGREEMENT = (0.97, 1.03)  # median harness/other ratio outside this band fails the row
# Single windows on a shared 2-core machine vary by ±10%; the median of 41 pair ratios sat within
# ±1.6% of 1.0 in 9 trials here (9 pairs: up to ±6%), so the band can be tight.
PAIRS = {"smoke": 11, "quick": 41, "full": 61}
WINDOW_S = {"smoke": 0.005, "quick": 0.01, "full": 0.02}  # seconds of calls per window, at least MIN_CALLS calls
MIN_CALLS = 2
SIZES = {"cpu": (256, 1024), "gpu": (1024, 4096)}  # ~100 µs a call, and a long one


class SelfcheckFailed(Exception):
    pass


@dataclass(frozen=True)
class SelfcheckCase(Case):
    workload: ClassVar[str] = "selfcheck"
    dtype: str
    size: int


def cases(ctx: BuildContext) -> list[SelfcheckCase]:
    if ctx.profile == "smoke":
        return [SelfcheckCase("fp32", 128)]
    return [SelfcheckCase("fp32", n) for n in SIZES["cpu" if ctx.device.type == "cpu" else "gpu"]]


def harness_window_s(fn: Callable[[], Any], calls: int, clock: Clock) -> float:
    start = clock()
    for _ in range(calls):
        fn()
    return (clock() - start) / calls


def torch_benchmark_window_s(timer: tub.Timer, calls: int) -> float:
    """torch.utils.benchmark.Timer at the harness's thread count (its default of 1 would make the
    comparison meaningless on the CPU); it synchronizes CUDA itself."""
    return timer.timeit(calls).median


def interleaved_ratios(fn: Callable[[], Any], calls: int, pairs: int, clock: Clock, cuda: bool) -> tuple[list[float], list[float]]:
    """harness/torch.utils.benchmark (and harness/CUDA events) per pair of adjacent windows."""
    timer = tub.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    tub_ratios: list[float] = []
    event_ratios: list[float] = []
    for pair in range(pairs):
        if pair % 2:  # alternate which clock goes first, so an order effect cancels in the median
            tub_s = torch_benchmark_window_s(timer, calls)
            harness_s = harness_window_s(fn, calls, clock)
        else:
            harness_s = harness_window_s(fn, calls, clock)
            tub_s = torch_benchmark_window_s(timer, calls)
        tub_ratios.append(harness_s / tub_s)
        if cuda:
            event_ratios.append(harness_s / cuda_event_samples(fn, calls, 1)[0])
    return tub_ratios, event_ratios


def disagreement(name: str, ratio: float | None) -> str | None:
    if ratio is None or AGREEMENT[0] <= ratio <= AGREEMENT[1]:
        return None
    return f"selfcheck: harness/{name} median ratio {ratio:.3f} outside {AGREEMENT[0]}–{AGREEMENT[1]} — one of the clocks is wrong"


def build(case: SelfcheckCase, ctx: BuildContext) -> Timed:
    restore = with_precision(case.dtype)
    a, b, out = operands(case.size, case.dtype, ctx.device)
    fn = lambda: torch.matmul(a, b, out=out)  # noqa: E731
    base = tflops_figures(case.size, case.dtype, device_name(ctx.device))

    def pairs(measured: Measurement) -> dict[str, Any]:
        """The clocks compared after the case's own rounds, in interleaved pairs of windows; a
        disagreement while other processes used the CPU is measured again once, and if the machine
        is still busy the row says so instead of failing: load, not a wrong clock."""
        calls = max(MIN_CALLS, round(WINDOW_S[ctx.profile] / measured.stats.median_s))
        for attempt in range(2):
            load = LoadMeter()
            tub_ratios, event_ratios = interleaved_ratios(fn, calls, PAIRS[ctx.profile], ctx.clock, ctx.device.type == "cuda")
            busy = load.busy_frac()
            tub_ratio = statistics.median(tub_ratios)
            events_ratio = statistics.median(event_ratios) if event_ratios else None
            problems = [p for p in (disagreement("torch.utils.benchmark", tub_ratio), disagreement("cuda-events", events_ratio)) if p]
            if not problems or busy <= BUSY_FRAC:
                break
        done = f"{len(tub_ratios)} interleaved pairs of {calls} calls"
        figures = {"selfcheck_tub_ratio": tub_ratio, "selfcheck_events_ratio": events_ratio, "reason": done}
        if problems and busy > BUSY_FRAC:
            return dict(figures, flags=["busy"], reason=f"selfcheck inconclusive: machine busy (other processes used {busy:.0%} of the CPU, "
                                                        f"twice) — {'; '.join(problems)} ({done}); rerun on a quiet machine")
        if problems:
            raise SelfcheckFailed("; ".join(problems) + f" ({done})")
        return figures

    return Timed(fn=fn, figures=base, companion=pairs, cleanup=restore)


WORKLOAD = Workload(SPEC, cases, build)
