"""Proves the clock: a matmul timed by the harness's clock, by torch.utils.benchmark and, on CUDA,
by CUDA events, in interleaved windows so all see the same machine state. The row fails only when
the median ratio's 99% interval lies wholly outside AGREEMENT (an unsynchronized harness reads 0.03
ms for 1.36 ms); an unclear one is remeasured."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, ClassVar, Literal
from collections.abc import Callable

import torch

from gpubench.harness.core.flags import BUSY, NOISY
from gpubench.harness.measurement.cases import Case
from gpubench.harness.catalog.selfcheck import SPEC
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.devices.machine_load import BUSY_FRAC, LoadMeter
from gpubench.harness.measurement.loop import time_call
from gpubench.harness.measurement.measure import Measurement, Timed
from gpubench.harness.core.stats import median_ci
from gpubench.harness.measurement.timing import Clock, cuda_event_samples
from gpubench.harness.measurement.workload import Workload
from gpubench.harness.workloads.common.matmuls import (
    device_name,
    operands,
    tflops_figures,
    with_precision,
)

# a median harness/other ratio clearly outside this band fails the row
AGREEMENT = (0.97, 1.03)
# Windows on a shared 2-core machine vary ±10%, but the median of 41 pair ratios sat within ±1.6% of
# 1.0 in 9 trials (9 pairs: ±6%). The 1024 case still read 1.042 and 0.968 in 2 of 22 quiet A/A
# runs: hence the interval.
PAIRS = {"smoke": 11, "quick": 41, "full": 61}
# pair sets measured and pooled at most, while the verdict is unclear
ATTEMPTS = 3
CONFIDENCE = 0.99
Verdict = Literal["agree", "disagree", "unclear"]
# seconds of calls per window, at least MIN_CALLS calls
WINDOW_S = {"smoke": 0.005, "quick": 0.01, "full": 0.02}
MIN_CALLS = 2
# ~100 µs a call, and a long one
SIZES = {"cpu": (256, 1024), "gpu": (1024, 4096)}


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


def interleaved_ratios(
    fn: Callable[[], Any], calls: int, pairs: int, clock: Clock, cuda: bool
) -> tuple[list[float], list[float]]:
    """harness/torch.utils.benchmark (and harness/CUDA events) per pair of adjacent windows."""
    # Imported here: torch.utils.benchmark's cpp_extension calls torch.cuda.is_available(), which in
    # the fork server would leave every forked build unable to use CUDA.
    import torch.utils.benchmark as tub

    # at the harness's thread count (the timer's default of 1 is meaningless on the CPU); it syncs
    # CUDA itself
    timer = tub.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    tub_ratios: list[float] = []
    event_ratios: list[float] = []
    for pair in range(pairs):
        # alternate which clock goes first, so an order effect cancels in the median
        if pair % 2:
            tub_s = timer.timeit(calls).median
            harness_s = time_call(fn, clock, calls)
        else:
            harness_s = time_call(fn, clock, calls)
            tub_s = timer.timeit(calls).median
        tub_ratios.append(harness_s / tub_s)
        if cuda:
            event_ratios.append(harness_s / cuda_event_samples(fn, calls, 1)[0])
    return tub_ratios, event_ratios


def clock_verdict(ratios: list[float]) -> Verdict:
    """agree: the median is inside AGREEMENT; disagree: its confidence interval lies wholly outside;
    else unclear."""
    ratio, (low, high) = statistics.median(ratios), median_ci(ratios, CONFIDENCE)
    if AGREEMENT[0] <= ratio <= AGREEMENT[1]:
        return "agree"
    return "disagree" if high < AGREEMENT[0] or low > AGREEMENT[1] else "unclear"


def disagreement(name: str, ratios: list[float]) -> str | None:
    """The line naming a clock whose median is outside the band, with its interval; None inside."""
    if not ratios or clock_verdict(ratios) == "agree":
        return None
    low, high = median_ci(ratios, CONFIDENCE)
    return (
        f"harness/{name} median ratio {statistics.median(ratios):.3f} (99% CI "
        f"{low:.3f}–{high:.3f}) outside {AGREEMENT[0]}–{AGREEMENT[1]}"
    )


def set_up(case: SelfcheckCase, ctx: BuildContext) -> Timed:
    restore = with_precision(case.dtype)
    a, b, out = operands(case.size, case.dtype, ctx.device)
    fn = lambda: torch.matmul(a, b, out=out)  # noqa: E731
    base = tflops_figures(case.size, case.dtype, device_name(ctx.device))

    def pairs(measured: Measurement) -> dict[str, Any]:
        """After the case's rounds: a clear disagreement on a quiet machine fails the row; an
        unclear or busy one is pooled with more pairs (up to ATTEMPTS sets), and what stays so is
        "inconclusive" with its reason."""
        calls = max(MIN_CALLS, round(WINDOW_S[ctx.profile] / measured.stats.median_s))
        tub_ratios: list[float] = []
        event_ratios: list[float] = []
        for _ in range(ATTEMPTS):
            load = LoadMeter()
            more_tub, more_events = interleaved_ratios(
                fn, calls, PAIRS[ctx.profile], ctx.clock, ctx.device.type == "cuda"
            )
            busy = load.busy_frac()
            tub_ratios, event_ratios = tub_ratios + more_tub, event_ratios + more_events
            verdicts = {clock_verdict(r) for r in (tub_ratios, event_ratios) if r}
            if verdicts == {"agree"} or ("disagree" in verdicts and busy <= BUSY_FRAC):
                break
        done = f"{len(tub_ratios)} interleaved pairs of {calls} calls"
        figures = {
            "selfcheck_tub_ratio": statistics.median(tub_ratios),
            "selfcheck_events_ratio": statistics.median(event_ratios) if event_ratios else None,
            "reason": done,
        }
        problems = [
            p
            for p in (
                disagreement("torch.utils.benchmark", tub_ratios),
                disagreement("cuda-events", event_ratios),
            )
            if p
        ]
        if not problems:
            return figures
        if busy > BUSY_FRAC:
            return dict(
                figures,
                flags=[BUSY],
                reason=f"selfcheck inconclusive: machine busy (other processes used {busy:.0%} of "
                f"the CPU) — {'; '.join(problems)} ({done}); rerun on a quiet machine",
            )
        if "disagree" in verdicts:
            raise SelfcheckFailed(
                f"selfcheck: {'; '.join(problems)} — one of the clocks is wrong ({done})"
            )
        return dict(
            figures,
            flags=[NOISY],
            reason=f"selfcheck inconclusive: too noisy to tell — {'; '.join(problems)} ({done}): "
            "the interval reaches into the band; rerun on a quieter machine",
        )

    return Timed(fn=fn, figures=base, companion=pairs, cleanup=restore)


WORKLOAD = Workload(SPEC, cases, set_up)
