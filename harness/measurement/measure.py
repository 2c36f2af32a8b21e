"""One measurement of one build, usable without pytest: warm-up, calibration, then the rounds inside
an energy and telemetry region; the `Measurement` keeps the raw samples. The round driver is
pluggable (`Rounds`): pytest-benchmark's `pedantic` in the plugin, so its table and JSON hold the
CSV's samples."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any
from collections.abc import Callable

from gpubench.harness.devices.energy import EnergyMeter, EnergyReading, TelemetrySampler
from gpubench.harness.core.plan import BuildTiming, RoundPlan, plan_rounds
from gpubench.harness.budget.shares import CaseShare, OverBudget, capped_plan
from gpubench.harness.core.duration_text import format_duration
from gpubench.harness.core.stats import SampleStats, summarize
from gpubench.harness.measurement.loop import (
    Rounds,
    RoundsResult,
    energy_by_repetition,
    energy_window_s,
    inline_rounds,
    sample,
    time_call,
    warm_up,
)
from gpubench.harness.measurement.timing import SyncedClock


@dataclass
class Timed:
    """What a workload's build step hands the harness."""

    # the region to time
    fn: Callable[[], Any]
    # columns from the statistics and fn's last result (no timing); may add `flags` (a list) and
    # `reason`
    figures: Callable[[SampleStats, Any], dict[str, Any]] = lambda stats, result: {}
    # after the rounds, outside the energy region, same clock (selfcheck pairs, a speedup's CPU
    # side): columns
    companion: Callable[[Measurement], dict[str, Any]] | None = None
    # a fixed plan (one epoch, no warm-up epoch); None plans from a warm-up
    plan: RoundPlan | None = None
    # a cheaper warm-up than fn (a few steps before a timed epoch)
    warmup: Callable[[], Any] | None = None
    # samples from fn's result instead of the rounds
    windows: Callable[[Any], list[float]] | None = None
    # always called at the end (restores flags such as TF32)
    cleanup: Callable[[], None] | None = None
    # one untimed call under the allocator profiler: cpu peak memory
    cpu_memory: Callable[[], Any] | None = None
    notes: list[str] = field(default_factory=list)
    # a column that also holds one call's energy (energy_to_target_j)
    energy_alias: str | None = None
    # False where the region's joules are not the case's (a DDP launch: mostly process start);
    # energy_note says why
    energy: bool = True
    energy_note: str = ""
    # samples per call where the throughput covers only part of it (an epoch's eval is in its
    # energy)
    samples_per_call: int | None = None
    estimate: Callable[[], float] | None = None

    @property
    def repeatable(self) -> bool:
        """Planned from its own warm-up (not a fixed epoch or a launch): it can be called again."""
        return self.plan is None and self.windows is None


@dataclass
class Measurement:
    """Raw samples (seconds per call) of one build and what was read around them; statistics derive
    from them."""

    plan: RoundPlan
    samples_s: list[float]
    result: Any
    # calls the energy reading covers (a driver's extra call included; 1: a per-call reading)
    calls: int
    energy: EnergyReading = field(default_factory=lambda: EnergyReading(None, 0.0))
    telemetry: dict[str, Any] = field(default_factory=dict)
    # the case's first call, warm-up included (what a budget must afford)
    first_call_s: float | None = None
    # why the rounds were cut to fit a run budget ('' when not)
    capped: str = ""

    @cached_property
    def stats(self) -> SampleStats:
        return summarize(self.samples_s)


def in_region(
    run: Callable[[], RoundsResult],
    meter: EnergyMeter,
    sampler: TelemetrySampler | None,
    clock: SyncedClock,
) -> tuple[RoundsResult, EnergyReading, dict[str, Any]]:
    """`run` with energy and telemetry over it alone, the device drained at both edges so queued
    work counts in the region that queued it (warm-up's is not this region's)."""
    clock()
    if sampler is not None:
        sampler.start()
    try:
        mark = meter.start()
        rounds = run()
        clock()
        reading = meter.stop(mark)
    # the polling thread stops even when the counter read fails
    finally:
        telemetry = sampler.stop() if sampler is not None else {}
    return rounds, reading, telemetry


def plan_for(timed: Timed, timing: BuildTiming, clock: SyncedClock) -> RoundPlan:
    """Warm up outside the samples and plan the rounds (a workload's fixed plan: `fixed_plan`)."""
    estimate_s = warm_up(timed.warmup or timed.fn, timing.warmup_calls, clock, timing.target_s)
    return calibrated(timed, plan_rounds(estimate_s, timing), timing, clock)


def calibrated(timed: Timed, plan: RoundPlan, timing: BuildTiming, clock: SyncedClock) -> RoundPlan:
    # calibrate on one whole round (still warm-up): rounds must really last >= min_round_s
    if plan.iterations > 1:
        one_round = RoundPlan(0, plan.iterations, 1, plan.estimate_s)
        plan = plan_rounds(sample(timed.fn, one_round, clock)[0], timing)
    return plan


def check_estimate(timed: Timed, share: CaseShare) -> None:
    """A workload's cheap estimate of one call (a smaller problem, a few steps), before the call."""
    estimate_s = timed.estimate() if timed.estimate is not None else None
    # the row keeps the estimate: the next run skips it unbuilt
    if estimate_s is not None and estimate_s > share.left_s():
        raise OverBudget(share.over(estimate_s), estimate_s)


def budgeted_plan(
    timed: Timed, timing: BuildTiming, clock: SyncedClock, share: CaseShare
) -> tuple[RoundPlan, float, str]:
    """(plan, first call's seconds, cap reason) under a timing: the first call must fit, warm-up
    stops early on a small share, and the rounds are cut to what is left."""
    check_estimate(timed, share)
    warm = timed.warmup or timed.fn
    first_s = time_call(warm, clock)
    if first_s > share.left_s():
        raise OverBudget(share.over(first_s), first_s)
    estimate_s = first_s
    if timing.warmup_calls > 1:
        estimate_s = warm_up(
            warm, timing.warmup_calls - 1, clock, min(timing.target_s, share.left_s() / 4)
        )
    plan = calibrated(timed, plan_rounds(estimate_s, timing), timing, clock)
    if plan.estimate_s * plan.iterations > share.left_s():
        raise OverBudget(share.over(plan.estimate_s * plan.iterations), first_s)
    return cut_to_share(plan, plan, first_s, share)


def fixed_plan(
    timed: Timed, clock: SyncedClock, share: CaseShare | None
) -> tuple[RoundPlan, float | None, str]:
    """A workload's fixed plan, its estimate checked against the share; one of several rounds is cut
    like any other, after one more call tells what a call costs."""
    plan = timed.plan
    assert plan is not None
    if share is not None:
        check_estimate(timed, share)
    if plan.warmup_calls > 0:
        warm_up(timed.warmup or timed.fn, plan.warmup_calls, clock)
    if share is None or plan.rounds == 1 or timed.windows is not None:
        return plan, None, ""
    call_s = time_call(timed.fn, clock)
    if call_s * plan.iterations > share.left_s():
        raise OverBudget(share.over(call_s), call_s)
    return cut_to_share(plan, replace(plan, estimate_s=call_s), call_s, share)


def cut_to_share(
    plan: RoundPlan, priced: RoundPlan, first_s: float, share: CaseShare
) -> tuple[RoundPlan, float, str]:
    """(the plan, or its rounds cut to the time left as `priced` costs them, first_s, why it was
    cut)."""
    cut = capped_plan(priced, share.left_s())
    if cut.rounds == plan.rounds:
        return plan, first_s, ""
    share_s, budget_s = format_duration(share.share_s), format_duration(share.budget_s)
    why = (
        f"capped: {cut.rounds} of {plan.rounds} rounds fit its {share_s} share of the {budget_s} "
        "budget"
    )
    return cut, first_s, why


def measure(
    timed: Timed,
    timing: BuildTiming,
    clock: SyncedClock,
    rounds: Rounds | None = None,
    meter: EnergyMeter | None = None,
    sampler: TelemetrySampler | None = None,
    share: CaseShare | None = None,
    why_not_repeated: str | None = "",
) -> Measurement:
    """Warm-up, calibration, then the rounds in the energy region; under `share` capped or skipped
    (OverBudget). `why_not_repeated`: None repeats a region too short for the counter where the
    share holds it (a GPU second at full power each: the runner asks only in a first build, outside
    smoke); a text goes into the reading's reason."""
    first_s: float | None = None
    capped = ""
    if timed.plan is not None:
        plan, first_s, capped = fixed_plan(timed, clock, share)
    elif share is not None:
        plan, first_s, capped = budgeted_plan(timed, timing, clock, share)
    else:
        plan = plan_for(timed, timing, clock)
    meter = meter or EnergyMeter(None)
    start = clock.unsynced()
    (samples_s, result, calls), energy, telemetry = in_region(
        lambda: (rounds or inline_rounds(clock))(timed.fn, plan), meter, sampler, clock
    )
    # a fixed plan's one call (an epoch)
    if first_s is None and plan.rounds * plan.iterations == 1:
        first_s = clock.unsynced() - start
    if timed.windows is not None:
        samples_s = timed.windows(result)
    measured = Measurement(plan, samples_s, result, calls, energy, telemetry, first_s, capped)
    reading = measured.energy
    if timed.energy and timed.repeatable and reading.energy_j is None and reading.source:
        why_not = (
            why_not_repeated if why_not_repeated is not None else repetition_overrun(share, meter)
        )
        if why_not is None:
            measured.energy = energy_by_repetition(timed.fn, measured.stats.median_s, meter, clock)
            measured.calls = 1
        elif why_not:
            measured.energy = replace(reading, reason=f"{reading.reason} ({why_not})")
    return measured


def repetition_overrun(share: CaseShare | None, meter: EnergyMeter) -> str | None:
    """Why the energy repetition would run past the case's share of the run budget; None when it
    fits."""
    if share is None or share.left_s() >= energy_window_s(meter):
        return None
    return (
        f"not repeated for energy: its {energy_window_s(meter):.2g} s do not fit the "
        f"{format_duration(max(share.left_s(), 0.0))} left of the case's share of the budget"
    )
