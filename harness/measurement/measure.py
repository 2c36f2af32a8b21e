"""One measurement of one build, usable from a plain script (no pytest): `measure(timed, ...)`
warms up outside the samples, calibrates, runs the rounds with the one clock inside an energy and
telemetry region, and returns a `Measurement` that keeps the raw samples and derives statistics
from them (after torch.utils.benchmark's Measurement).

    from gpubench.harness.measurement.measure import Timed, measure
    m = measure(Timed(fn=lambda: torch.matmul(a, b)), Profile.QUICK.budget, SyncedClock(device))
    print(m.stats.median_s, m.samples_s)

Every phase runs through the one loop (gpubench.harness.measurement.loop): warm-up, calibration, the rounds
and the energy repetition. Who drives the rounds is pluggable (`Rounds`): the loop's `inline_rounds`,
or pytest-benchmark's `pedantic` in the pytest plugin, so its table and JSON hold the same samples as
the CSV.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Protocol
from collections.abc import Callable

from gpubench.harness.devices.energy import EnergyMeter, EnergyReading, TelemetrySampler
from gpubench.harness.core.plan import Budget, RoundPlan, plan_rounds
from gpubench.harness.core.run_budget import CaseShare, OverBudget, capped_plan, format_duration
from gpubench.harness.core.stats import SampleStats, summarize
from gpubench.harness.measurement.loop import energy_by_repetition, energy_window_s, inline_rounds, sample, time_call, warm_up
from gpubench.harness.measurement.timing import SyncedClock


@dataclass
class Timed:
    """What a workload's build step hands the harness.

    fn: the region to time (device work it queues is covered by the synced clock).
    figures: derives columns (tflops, gbps, accuracy...) from the statistics and fn's last result,
        and nothing else (no timing); may add `flags` (a list) and `reason` (text).
    companion: a measurement that accompanies the case after its rounds, outside the energy region
        and with the same clock (the selfcheck's interleaved pairs, the CPU side of a speedup);
        returns columns.
    plan: a fixed plan (e.g. one full epoch, no warm-up epoch); None plans from a warm-up of fn.
    warmup: a cheaper warm-up than fn itself (e.g. a few training steps before a timed epoch).
    windows: raw samples taken from fn's result instead of the rounds (an epoch timed in windows
        of steps); the row's statistics are then over those windows.
    cleanup: always called at the end (restores global flags such as TF32).
    cpu_memory: one untimed call of this under the allocator profiler gives the cpu peak memory.
    energy_alias: a column that also holds the energy of one call (energy_to_target_j).
    energy: False where the region's joules would not be the case's (a DDP launch: mostly process
        start, and ranks on other GPUs unread); `energy_note` says why in the row.
    samples_per_call: samples one call processes, where its throughput figure covers only part of
        the call (an epoch's samples_per_s is over training, its energy over training and eval).
    """

    fn: Callable[[], Any]
    figures: Callable[[SampleStats, Any], dict[str, Any]] = lambda stats, result: {}
    companion: Callable[[Measurement], dict[str, Any]] | None = None
    plan: RoundPlan | None = None
    warmup: Callable[[], Any] | None = None
    windows: Callable[[Any], list[float]] | None = None
    cleanup: Callable[[], None] | None = None
    cpu_memory: Callable[[], Any] | None = None
    notes: list[str] = field(default_factory=list)
    energy_alias: str | None = None
    energy: bool = True
    energy_note: str = ""
    samples_per_call: int | None = None
    estimate: Callable[[], float] | None = None

    @property
    def repeatable(self) -> bool:
        """Planned from its own warm-up (not a fixed epoch or a launch): it can be called again."""
        return self.plan is None and self.windows is None


@dataclass
class Measurement:
    """Raw samples (seconds per call) of one build and what was read around them; statistics are
    derived from the samples, never stored apart from them."""

    plan: RoundPlan
    samples_s: list[float]
    result: Any
    calls: int  # calls of fn the energy reading covers (a driver's extra call included; 1: a per-call reading)
    energy: EnergyReading = field(default_factory=lambda: EnergyReading(None, 0.0))
    telemetry: dict[str, Any] = field(default_factory=dict)
    first_call_s: float | None = None  # the case's first call, warm-up included (what a budget must afford)
    capped: str = ""  # why the rounds were cut to fit a run budget ('' when not)

    @cached_property
    def stats(self) -> SampleStats:
        return summarize(self.samples_s)


class Rounds(Protocol):
    """Runs `plan.rounds` rounds of `plan.iterations` calls; returns seconds per call per round,
    the last result, and how many calls it made (pytest-benchmark makes one more after the rounds
    when iterations > 1, for the result)."""

    def __call__(self, fn: Callable[[], Any], plan: RoundPlan) -> tuple[list[float], Any, int]: ...


class Region:
    """Energy and telemetry over the timed rounds only: warm-up and calibration stay outside. The
    device is drained at both edges, so queued work is counted in the region that queued it."""

    def __init__(self, meter: EnergyMeter, sampler: TelemetrySampler | None, clock: SyncedClock) -> None:
        self.meter, self.sampler, self.clock = meter, sampler, clock
        self.reading = EnergyReading(None, 0.0)
        self.telemetry: dict[str, Any] = {}

    def __enter__(self) -> Region:
        self.clock()  # work queued by warm-up is not this region's energy
        if self.sampler is not None:
            self.sampler.start()
        self._mark = self.meter.start()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.clock()
            self.reading = self.meter.stop(self._mark)
        finally:  # the polling thread stops even when the counter read fails
            if self.sampler is not None:
                self.telemetry = self.sampler.stop()


def plan_for(timed: Timed, budget: Budget, clock: SyncedClock) -> RoundPlan:
    """Warm up outside the samples and plan the rounds (a workload's fixed plan: `fixed_plan`)."""
    estimate_s = warm_up(timed.warmup or timed.fn, budget.warmup_calls, clock, budget.target_s)
    return calibrated(timed, plan_rounds(estimate_s, budget), budget, clock)


def calibrated(timed: Timed, plan: RoundPlan, budget: Budget, clock: SyncedClock) -> RoundPlan:
    if plan.iterations > 1:  # calibrate on one whole round (still warm-up): rounds must really last >= min_round_s
        plan = plan_rounds(sample(timed.fn, RoundPlan(0, plan.iterations, 1, plan.estimate_s), clock)[0], budget)
    return plan


def check_estimate(timed: Timed, share: CaseShare) -> None:
    """A workload's cheap estimate of one call (a smaller problem, a few steps), before the call."""
    estimate_s = timed.estimate() if timed.estimate is not None else None
    if estimate_s is not None and estimate_s > share.left_s():  # the row keeps the estimate: the next run skips it unbuilt
        raise OverBudget(share.over(estimate_s), estimate_s)


def budgeted_plan(timed: Timed, budget: Budget, clock: SyncedClock, share: CaseShare) -> tuple[RoundPlan, float, str]:
    """Under a run budget: the first call decides (it must leave room for one more), warm-up stops
    early on a small share, and the rounds are cut to what is left of the share (`capped`).
    Returns the plan, the first call's seconds and the cap's reason ('' when not capped)."""
    check_estimate(timed, share)
    warm = timed.warmup or timed.fn
    first_s = time_call(warm, clock)
    if first_s > share.left_s():
        raise OverBudget(share.over(first_s), first_s)
    estimate_s = first_s
    if budget.warmup_calls > 1:
        estimate_s = warm_up(warm, budget.warmup_calls - 1, clock, min(budget.target_s, share.left_s() / 4))
    plan = calibrated(timed, plan_rounds(estimate_s, budget), budget, clock)
    if plan.estimate_s * plan.iterations > share.left_s():
        raise OverBudget(share.over(plan.estimate_s * plan.iterations), first_s)
    cut = capped_plan(plan, share.left_s())
    return (plan, first_s, "") if cut.rounds == plan.rounds else (cut, first_s, capped_reason(cut, plan, share))


def fixed_plan(timed: Timed, clock: SyncedClock, share: CaseShare | None) -> tuple[RoundPlan, float | None, str]:
    """A workload's fixed plan (one epoch, a launch, steps): its estimate is checked against the
    share; a plan of several rounds of its own calls (steps) is cut like any other, after one more
    warm-up call that tells what a call costs."""
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
    cut = capped_plan(RoundPlan(plan.warmup_calls, plan.iterations, plan.rounds, call_s), share.left_s())
    if cut.rounds == plan.rounds:
        return plan, call_s, ""
    return cut, call_s, capped_reason(cut, plan, share)


def capped_reason(cut: RoundPlan, plan: RoundPlan, share: CaseShare) -> str:
    share_s, budget_s = format_duration(share.share_s), format_duration(share.budget_s)
    return f"capped: {cut.rounds} of {plan.rounds} rounds fit its {share_s} share of the {budget_s} budget"


def measure(timed: Timed, budget: Budget, clock: SyncedClock, rounds: Rounds | None = None,
            meter: EnergyMeter | None = None, sampler: TelemetrySampler | None = None,
            share: CaseShare | None = None, why_not_repeated: str | None = "") -> Measurement:
    """Warm-up, calibration, then the rounds inside the energy/telemetry region. Under a run
    budget (`share`) the case is capped or skipped (OverBudget) rather than run past its share.
    `why_not_repeated`: None repeats a region too short for the energy counter for its energy
    (`energy_by_repetition`) where what is left of the case's share holds it; a text leaves it and adds
    itself to the reading's reason ('' adds nothing). On a GPU (1 s window) each repetition is over a
    second of full-power work: the runner asks for one in the first build of a case, outside smoke."""
    first_s: float | None = None
    capped = ""
    if timed.plan is not None:
        plan, first_s, capped = fixed_plan(timed, clock, share)
    elif share is not None:
        plan, first_s, capped = budgeted_plan(timed, budget, clock, share)
    else:
        plan = plan_for(timed, budget, clock)
    meter = meter or EnergyMeter(None)
    region = Region(meter, sampler, clock)
    start = clock.unsynced()
    with region:
        samples_s, result, calls = (rounds or inline_rounds(clock))(timed.fn, plan)
    if first_s is None and plan.rounds * plan.iterations == 1:  # a fixed plan's one call (an epoch)
        first_s = clock.unsynced() - start
    if timed.windows is not None:
        samples_s = timed.windows(result)
    measured = Measurement(plan, samples_s, result, calls, region.reading, region.telemetry, first_s, capped)
    reading = measured.energy
    if timed.energy and timed.repeatable and reading.energy_j is None and reading.source:
        why_not = why_not_repeated if why_not_repeated is not None else repetition_overrun(share, meter)
        if why_not is None:
            measured.energy, measured.calls = energy_by_repetition(timed.fn, measured.stats.median_s, meter, clock), 1
        elif why_not:
            measured.energy = replace(reading, reason=f"{reading.reason} ({why_not})")
    return measured


def repetition_overrun(share: CaseShare | None, meter: EnergyMeter) -> str | None:
    """Why the energy repetition would run past the case's share of the run budget; None when it fits."""
    if share is None or share.left_s() >= energy_window_s(meter):
        return None
    return (f"not repeated for energy: its {energy_window_s(meter):.2g} s do not fit the "
            f"{format_duration(max(share.left_s(), 0.0))} left of the case's share of the budget")
