"""The one clock. Everything that times anything in gpubench goes through here.

Design (after torch.utils.benchmark and triton.testing.do_bench):
- `synced_clock()` is a host clock that first synchronizes the active device, so a region
  [synced_clock(), work, synced_clock()] covers the device work queued inside it and nothing
  queued before it. It is installed as pytest-benchmark's `--benchmark-timer`, so pytest-benchmark
  drives the rounds while the figures stay correct on asynchronous devices. Because the sync sits at
  the region edges, a round of many iterations pays for one sync, not one per call.
- warm-up calls never enter the samples; `plan_rounds` picks iterations/rounds from them.
- raw samples are returned; statistics are derived elsewhere (harness.stats).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import torch

from harness.device import synchronize

_active_device = torch.device("cpu")
_base_clock: Callable[[], float] = time.perf_counter


def set_active_device(device: torch.device, base_clock: Callable[[], float] | None = None) -> None:
    """Choose the device `synced_clock` synchronizes, and optionally the host clock it reads."""
    global _active_device, _base_clock
    _active_device = device
    if base_clock is not None:
        _base_clock = base_clock


def synced_clock() -> float:
    """Seconds from the host clock, read only after the active device has drained its queue."""
    synchronize(_active_device)
    return _base_clock()


@dataclass(frozen=True)
class RoundPlan:
    """How to sample one case: `iterations` calls per timed round, `rounds` rounds."""

    warmup_calls: int
    iterations: int
    rounds: int
    estimate_s: float  # seconds per call seen during warm-up


@dataclass(frozen=True)
class Budget:
    """Time budget per case; the profiles differ only in these numbers."""

    target_s: float = 1.0  # total timed seconds per case
    min_round_s: float = 1e-3  # a round shorter than this is dominated by sync/launch overhead
    min_rounds: int = 5
    max_rounds: int = 200
    warmup_calls: int = 3


def warm_up(fn: Callable[[], object], calls: int, max_s: float = float("inf")) -> float:
    """Run `fn` up to `calls` times (cuBLAS init, autotune, lazy allocation) and return the seconds
    per call of the last one, which the round planner uses. None of this enters the samples.

    A slow case stops warming after two calls once `max_s` is spent: the first call pays the
    one-time costs, the second is already a steady-state estimate."""
    last_s = spent_s = 0.0
    for done in range(max(1, calls)):
        if done >= 2 and spent_s > max_s:
            break
        start = synced_clock()
        fn()
        last_s = synced_clock() - start
        spent_s += last_s
    return last_s


def plan_rounds(estimate_s: float, budget: Budget) -> RoundPlan:
    """Pick iterations per round (so a round lasts >= min_round_s) and rounds (to fill target_s)."""
    per_call = max(estimate_s, 1e-9)
    iterations = max(1, math.ceil(budget.min_round_s / per_call))
    round_s = per_call * iterations
    rounds = int(min(budget.max_rounds, max(budget.min_rounds, budget.target_s // round_s)))
    return RoundPlan(budget.warmup_calls, iterations, rounds, estimate_s)


def sample(fn: Callable[[], object], plan: RoundPlan) -> list[float]:
    """Time `plan.rounds` rounds of `plan.iterations` calls; seconds per call for each round.

    This is the harness's own sampler for regions that pytest-benchmark does not drive (the CPU
    side of a speedup, the selfcheck); it uses the same clock and the same plan.
    """
    samples_s: list[float] = []
    for _ in range(plan.rounds):
        start = synced_clock()
        for _ in range(plan.iterations):
            fn()
        samples_s.append((synced_clock() - start) / plan.iterations)
    return samples_s


def measure(fn: Callable[[], object], budget: Budget) -> tuple[RoundPlan, list[float]]:
    """Warm up, plan, sample: the whole measurement for regions outside pytest-benchmark."""
    estimate_s = warm_up(fn, budget.warmup_calls, budget.target_s)
    plan = plan_rounds(estimate_s, budget)
    return plan, sample(fn, plan)


def cuda_event_samples(fn: Callable[[], object], iterations: int, rounds: int) -> list[float]:
    """Seconds per call measured with CUDA events recorded on the current stream (an independent
    clock: the GPU's own), one synchronize at the end as in triton.testing.do_bench."""
    pairs = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iterations):
            fn()
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    return [s.elapsed_time(e) / 1e3 / iterations for s, e in pairs]


class Stopwatch:
    """Accumulates synchronized spans inside a workload (e.g. data wait vs compute in an epoch)."""

    def __init__(self) -> None:
        self.total_s = 0.0
        self._start: float | None = None

    def start(self, sync: bool = True) -> None:
        self._start = synced_clock() if sync else _base_clock()

    def stop(self, sync: bool = True) -> float:
        assert self._start is not None, "stop() without start()"
        span = (synced_clock() if sync else _base_clock()) - self._start
        self._start = None
        self.total_s += span
        return span
