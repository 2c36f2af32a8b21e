"""How busy the machine was around a case (others' CPU share, others on the GPU): a busy neighbour changes
results many-fold, so the row says so."""

from __future__ import annotations

import os
import time

import psutil
import torch

from gpubench.harness.devices.env import gpu_other_processes
from gpubench.harness.records.row import Load

BUSY_FRAC = 0.25  # other processes took more than this share of the machine's CPU during the case


class LoadMeter:
    """Other processes' share of the machine's CPU during a case: system CPU time minus this tree's, over wall time."""

    def __init__(self) -> None:
        self.start_wall = time.monotonic()
        self.start_system, self.start_own = self._system_s(), self._own_s()

    @staticmethod
    def _system_s() -> float:
        times = psutil.cpu_times()
        return float(times.user + times.system + getattr(times, "nice", 0.0))

    @staticmethod
    def _own_s() -> float:
        me = psutil.Process()
        total = sum(me.cpu_times()[:2])
        for child in me.children(recursive=True):
            try:
                total += sum(child.cpu_times()[:2])
            except psutil.Error:
                continue
        return total + sum(os.times()[2:4])  # children already reaped (DataLoader workers, torchrun)

    def busy_frac(self) -> float:
        wall_s = time.monotonic() - self.start_wall
        if wall_s <= 0:
            return 0.0
        others_s = (self._system_s() - self.start_system) - (self._own_s() - self.start_own)
        return min(1.0, max(0.0, others_s / (wall_s * (os.cpu_count() or 1))))


def load_of(busy_frac: float, device: torch.device) -> Load:
    """The load part of a finished row: cpu_busy_frac, gpu_other_procs and the busy flags."""
    gpu_other_procs = gpu_other_processes(device.index or 0) if device.type == "cuda" else None
    flags = (["busy-gpu"] if gpu_other_procs else []) + (["busy"] if busy_frac > BUSY_FRAC else [])
    return Load(round(busy_frac, 4), gpu_other_procs, tuple(flags))
