"""The one measurement loop: batches of calls, each between two reads of the synced clock, sized
one after another by a hook (after torch.utils.benchmark's `_threaded_measurement_loop`, whose
`stop_hook` and `time_hook` decide when `blocked_autorange` and `adaptive_autorange` stop).

Every phase of a measurement is this loop with its own hook:
- `warm_up`: single calls until enough were made or a slow case has spent its time; none of them
  enters the samples.
- `time_call`: one batch of calls, seconds per call (a budget's first call, a fixed plan's cost of a
  call, a workload's estimate, a window or a rank's round).
- `sample` / `inline_rounds`: `plan.rounds` batches of `plan.iterations` calls; seconds per call.
- `energy_by_repetition`: batches sized from the time per call until an energy counter's window is
  filled (a region too short for the counter, measured again for its energy only).

Only the rounds keep fn's result (a workload's figures read it); the other phases drop it at once,
so no extra output is alive while the region's peak memory is read.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpubench.harness.core.plan import RoundPlan
from gpubench.harness.devices.energy import EnergyMeter, EnergyReading
from gpubench.harness.measurement.timing import Clock

MAX_ENERGY_CALLS = 1_000_000
# The first energy batch, sized from the rounds' median, aims at 80% of the window: a median that came
# out short would otherwise overshoot by as much. The calls added then aim 5% past the window.
FIRST_BATCH_SHARE = 0.8
MISSING_CALLS_MARGIN = 1.05


@dataclass
class Batches:
    """What the loop ran so far: each batch's calls and seconds, and fn's last result (rounds only)."""

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


NextBatch = Callable[[Batches], int]
"""The loop's hook: how many calls the next batch makes, given the batches so far; 0 ends the loop."""


def run_batches(fn: Callable[[], Any], clock: Clock, next_batch: NextBatch, keep_result: bool = False) -> Batches:
    """The loop. A batch is [clock(), calls of fn, clock()]: with a synced clock the region covers the
    device work its calls queued, and a batch of many calls pays for one sync, not one per call."""
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


def warm_up(fn: Callable[[], object], calls: int, clock: Clock, max_s: float = float("inf")) -> float:
    """Run `fn` up to `calls` times (cuBLAS init, autotune, lazy allocation) and return the seconds
    per call of the fastest of the last two, which the round planner uses. None of this enters
    the samples.

    A slow case stops warming after two calls once `max_s` is spent: the first call pays the
    one-time costs, the second is already a steady-state estimate."""
    wanted = max(1, calls)

    def next_batch(done: Batches) -> int:
        made = len(done.calls)
        return 0 if made >= wanted or (made >= 2 and done.total_s > max_s) else 1

    return min(run_batches(fn, clock, next_batch).seconds[-2:])


def rounds_of(plan: RoundPlan) -> NextBatch:
    """The hook of a planned measurement: `plan.rounds` batches of `plan.iterations` calls."""
    return lambda done: plan.iterations if len(done.calls) < plan.rounds else 0


def sample(fn: Callable[[], object], plan: RoundPlan, clock: Clock) -> list[float]:
    """Time `plan.rounds` rounds of `plan.iterations` calls; seconds per call for each round.

    The harness's sampler for regions that pytest-benchmark does not drive (the CPU side of a
    speedup, the selfcheck, calibration); the same clock and the same plan as the measured rounds."""
    return run_batches(fn, clock, rounds_of(plan)).per_call_s()


RoundsResult = tuple[list[float], Any, int]


def inline_rounds(clock: Clock) -> Callable[[Callable[[], Any], RoundPlan], RoundsResult]:
    """The harness's own round driver: the loop over the plan, keeping fn's last result."""
    def run(fn: Callable[[], Any], plan: RoundPlan) -> RoundsResult:
        done = run_batches(fn, clock, rounds_of(plan), keep_result=True)
        return done.per_call_s(), done.result, done.total_calls

    return run


def fill_window(window_s: float, median_s: float) -> NextBatch:
    """The energy repetition's hook: the first batch is sized from `median_s` to most of the window;
    the missing calls are then added, sized from the time per call just measured (back-to-back calls
    run faster than rounds that each end in a sync), not the whole batch again."""
    def next_batch(done: Batches) -> int:
        calls, elapsed_s = done.total_calls, done.total_s
        if elapsed_s >= window_s or calls >= MAX_ENERGY_CALLS:
            return 0
        per_call_s = max(elapsed_s / calls, 1e-9) if calls else max(median_s, 1e-9)
        margin = MISSING_CALLS_MARGIN if calls else FIRST_BATCH_SHARE
        return min(MAX_ENERGY_CALLS - calls, max(1, math.ceil((window_s - elapsed_s) * margin / per_call_s)))

    return next_batch


def energy_window_s(meter: EnergyMeter) -> float:
    """How long the energy repetition runs: the counter's window with a margin."""
    return meter.min_window_s * 1.2


def energy_by_repetition(fn: Callable[[], Any], median_s: float, meter: EnergyMeter, clock: Clock) -> EnergyReading:
    """A region too short for the counter, measured again for energy only: calls until the
    counter's window is filled; the reading is per call."""
    clock()  # work queued before is not this region's energy
    mark = meter.start()
    done = run_batches(fn, clock, fill_window(energy_window_s(meter), median_s))
    reading = meter.stop(mark)
    calls = done.total_calls
    return EnergyReading(reading.energy_j / calls if reading.energy_j is not None else None, reading.seconds / calls,
                         reading.source, reading.reason)
