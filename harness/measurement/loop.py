"""The one measurement loop: batches of calls between two reads of the synced clock, each sized by a
hook (after torch.utils.benchmark's `_threaded_measurement_loop`); warm-up, rounds and energy
repetition are this loop with their own hooks. Only the rounds keep fn's result, so no extra output
is alive while the region's peak memory is read."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpubench.harness.core.plan import RoundPlan
from gpubench.harness.devices.energy import EnergyMeter, EnergyReading
from gpubench.harness.measurement.timing import Clock

MAX_ENERGY_CALLS = 1_000_000
# The first energy batch aims at 80% of the window (a short median would overshoot by as much); the
# calls then added aim 5% past it.
FIRST_BATCH_SHARE = 0.8
MISSING_CALLS_MARGIN = 1.05


@dataclass
class Batches:
    """What the loop ran so far: each batch's calls and seconds, and fn's last result (rounds
    only)."""

    calls: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    result: Any = None

    @property
    def total_calls(self) -> int:
        return sum(self.calls)

    @property
    def total_s(self) -> float:
        return sum(self.seconds)

    def per_call_s(self) -> list[float]:
        return [seconds / calls for seconds, calls in zip(self.seconds, self.calls)]


# the calls of the next batch, given those so far; 0 ends the loop
NextBatch = Callable[[Batches], int]


def run_batches(
    fn: Callable[[], Any], clock: Clock, next_batch: NextBatch, keep_result: bool = False
) -> Batches:
    """Batches of [clock(), calls of fn, clock()]: a synced clock covers their device work with one
    sync a batch."""
    done = Batches()
    while (calls := next_batch(done)) > 0:
        start = clock()
        if keep_result:
            for _ in range(calls):
                done.result = fn()
        else:
            for _ in range(calls):
                fn()
        done.seconds.append(clock() - start)
        done.calls.append(calls)
    return done


def time_call(fn: Callable[[], Any], clock: Clock, calls: int = 1) -> float:
    """Seconds per call of one batch of `calls` calls of fn."""
    return run_batches(fn, clock, lambda done: 0 if done.calls else calls).seconds[0] / calls


def warm_up(
    fn: Callable[[], object], calls: int, clock: Clock, max_s: float = float("inf")
) -> float:
    """Up to `calls` unsampled calls (cuBLAS init, autotune, lazy allocation); the fastest of the
    last two plans the rounds. A slow case stops after two once `max_s` is spent: the second call is
    already steady state."""
    wanted = max(1, calls)

    def next_batch(done: Batches) -> int:
        made = len(done.calls)
        return 0 if made >= wanted or (made >= 2 and done.total_s > max_s) else 1

    return min(run_batches(fn, clock, next_batch).seconds[-2:])


def rounds_of(plan: RoundPlan) -> NextBatch:
    """The hook of a planned measurement: `plan.rounds` batches of `plan.iterations` calls."""
    return lambda done: plan.iterations if len(done.calls) < plan.rounds else 0


def sample(fn: Callable[[], object], plan: RoundPlan, clock: Clock) -> list[float]:
    """Seconds per call of each planned round, for regions pytest-benchmark does not drive
    (calibration, selfcheck)."""
    return run_batches(fn, clock, rounds_of(plan)).per_call_s()


# A round driver: the plan's rounds run, giving seconds per call per round, the last result, and the
# calls made (pytest-benchmark's `pedantic` makes one more after the rounds when iterations > 1, for
# the result).
RoundsResult = tuple[list[float], Any, int]
Rounds = Callable[[Callable[[], Any], RoundPlan], RoundsResult]


def inline_rounds(clock: Clock) -> Rounds:
    """The harness's own round driver: the loop over the plan, keeping fn's last result."""

    def run(fn: Callable[[], Any], plan: RoundPlan) -> RoundsResult:
        done = run_batches(fn, clock, rounds_of(plan), keep_result=True)
        return done.per_call_s(), done.result, done.total_calls

    return run


def fill_window(window_s: float, median_s: float) -> NextBatch:
    """The energy repetition's hook: a first batch from `median_s`, then the missing calls sized
    from the time per call just measured (back-to-back calls run faster than synced rounds)."""

    def next_batch(done: Batches) -> int:
        calls, elapsed_s = done.total_calls, done.total_s
        if elapsed_s >= window_s or calls >= MAX_ENERGY_CALLS:
            return 0
        per_call_s = max(elapsed_s / calls, 1e-9) if calls else max(median_s, 1e-9)
        margin = MISSING_CALLS_MARGIN if calls else FIRST_BATCH_SHARE
        return min(
            MAX_ENERGY_CALLS - calls,
            max(1, math.ceil((window_s - elapsed_s) * margin / per_call_s)),
        )

    return next_batch


def energy_window_s(meter: EnergyMeter) -> float:
    """How long the energy repetition runs: the counter's window with a margin."""
    return meter.min_window_s * 1.2


def energy_by_repetition(
    fn: Callable[[], Any], median_s: float, meter: EnergyMeter, clock: Clock
) -> EnergyReading:
    """A region too short for the counter, repeated for energy only until the window fills; the
    reading is per call."""
    # work queued before is not this region's energy
    clock()
    mark = meter.start()
    done = run_batches(fn, clock, fill_window(energy_window_s(meter), median_s))
    reading = meter.stop(mark)
    calls = done.total_calls
    energy_j = reading.energy_j / calls if reading.energy_j is not None else None
    return EnergyReading(energy_j, reading.seconds / calls, reading.source, reading.reason)
