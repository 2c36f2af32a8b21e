"""The one clock everything in gpubench times with. A `SyncedClock` synchronizes its device before
reading the host clock, so [clock(), work, clock()] covers exactly the work queued inside; syncing
only at the region's edges, a round of many iterations pays one sync, not one per call. Installed as
pytest-benchmark's timer too."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from gpubench.harness.devices.device import synchronize

Clock = Callable[[], float]


class SyncedClock:
    """Seconds from `base` (perf_counter unless --benchmark-timer chose one), read after `device`
    drains its queue."""

    # how pytest-benchmark names the timer in its table and JSON
    __name__ = "synced_clock"

    def __init__(self, device: torch.device, base: Clock = time.perf_counter) -> None:
        self.device = device
        self.base = base

    def __call__(self) -> float:
        synchronize(self.device)
        return self.base()

    def unsynced(self) -> float:
        """The host clock without a sync (e.g. time spent waiting for the next batch)."""
        return self.base()

    def __repr__(self) -> str:
        return f"SyncedClock({self.device}, base={getattr(self.base, '__name__', self.base)})"


def cuda_event_samples(fn: Callable[[], object], iterations: int, rounds: int) -> list[float]:
    """Seconds per call by CUDA events on the current stream (the GPU's own clock), one final sync
    as in do_bench."""
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
    """Accumulates spans inside a workload (e.g. data wait vs compute in an epoch)."""

    def __init__(self, clock: SyncedClock) -> None:
        self.clock = clock
        self.total_s = 0.0
        self._start: float | None = None

    def _now(self, sync: bool) -> float:
        return self.clock() if sync else self.clock.unsynced()

    def start(self, sync: bool = True) -> None:
        self._start = self._now(sync)

    def stop(self, sync: bool = True) -> float:
        assert self._start is not None, "stop() without start()"
        span = self._now(sync) - self._start
        self._start = None
        self.total_s += span
        return span


_build_clock: SyncedClock | None = None


def install_build_clock(clock: SyncedClock | None) -> SyncedClock | None:
    """The clock `build_clock` reads; the plugin names build_clock as pytest-benchmark's
    --benchmark-timer (its public way to take a timer), so every round is timed with the one synced
    clock."""
    global _build_clock
    previous, _build_clock = _build_clock, clock
    # an embedding run's clock (pytester inside a gpubench session), put back after
    return previous


def build_clock() -> float:
    return (_build_clock or time.perf_counter)()
