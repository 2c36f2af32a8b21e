"""How busy the machine was around a case (others' CPU share, others on the GPU): a busy neighbour
changes results many-fold, so the row says so."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil
import torch

from gpubench.harness.core.flags import BUSY, BUSY_FRAC, BUSY_GPU
from gpubench.harness.devices.cpu_limits import usable_cores
from gpubench.harness.devices.env import gpu_other_processes, gpu_utilization
from gpubench.harness.records.row import Load

# before the first case, kernels ran on the GPU more than this share of NVML's last period
GPU_BUSY_FRAC = 0.1


class LoadMeter:
    """Other processes' share of the CPUs this process may run on during a case: their CPU time
    minus this tree's, over wall time. Under taskset the other CPUs' load is no one's share of
    ours."""

    def __init__(self) -> None:
        self.cpus = own_cpus()
        self.start_wall = time.monotonic()
        self.start_system, self.start_own = self._system_s(), self._own_s()

    def _system_s(self) -> float:
        if self.cpus is not None:
            return cpus_busy_s(self.cpus)
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
        # children already reaped (DataLoader workers, torchrun)
        return total + sum(os.times()[2:4])

    def busy_frac(self) -> float:
        wall_s = time.monotonic() - self.start_wall
        if wall_s <= 0:
            return 0.0
        others_s = (self._system_s() - self.start_system) - (self._own_s() - self.start_own)
        cpus = len(self.cpus) if self.cpus is not None else os.cpu_count() or 1
        return min(1.0, max(0.0, others_s / (wall_s * cpus)))


PROC_STAT = Path("/proc/stat")


def own_cpus(stat: Path = PROC_STAT) -> frozenset[int] | None:
    """The CPUs this process's affinity allows where that is fewer than the machine's and /proc/stat
    counts each by its number (psutil's per-CPU list skips an offline one, shifting the rest); None:
    the machine's share."""
    try:
        allowed = frozenset(os.sched_getaffinity(0))
    # not Linux
    except (AttributeError, OSError):
        return None
    return allowed if len(allowed) < (os.cpu_count() or 0) and stat.is_file() else None


def cpus_busy_s(cpus: frozenset[int], stat: Path = PROC_STAT) -> float:
    """Seconds `cpus` spent in user, nice and system time since boot, from /proc/stat's `cpuN` lines
    (clock ticks)."""
    ticks = 0
    for line in stat.read_text().splitlines():
        name, _, fields = line.partition(" ")
        if name[3:].isdigit() and name.startswith("cpu") and int(name[3:]) in cpus:
            user, nice, system = (int(value) for value in fields.split()[:3])
            ticks += user + nice + system
    return ticks / os.sysconf("SC_CLK_TCK")


def load_of(busy_frac: float, device: torch.device) -> Load:
    """The load part of a finished row: cpu_busy_frac, gpu_other_procs and the busy flags."""
    gpu_other_procs = gpu_other_processes(device.index or 0) if device.type == "cuda" else None
    flags = ([BUSY_GPU] if gpu_other_procs else []) + ([BUSY] if busy_frac > BUSY_FRAC else [])
    return Load(round(busy_frac, 4), gpu_other_procs, tuple(flags))


# The look before the first case spans at least this long: enough clock ticks on every core to say
# who used them.
LOOK_WINDOW_S = 0.3
WAIT_POLL_S = 1.0


@dataclass(frozen=True)
class Look:
    """What else used the machine just before the first case: others' share of the CPU, others on
    the GPU."""

    cores: int
    busy_frac: float
    gpu_other_procs: int | None = None
    # NVML's utilization before this process ran a kernel: others' work
    gpu_util_frac: float | None = None

    @property
    def busy(self) -> bool:
        return (
            self.busy_frac > BUSY_FRAC
            or bool(self.gpu_other_procs)
            or (self.gpu_util_frac or 0) > GPU_BUSY_FRAC
        )

    @property
    def cpu_busy(self) -> bool:
        return self.busy_frac > BUSY_FRAC

    def free_cores(self) -> int:
        return max(1, round(self.cores * (1 - self.busy_frac)))


def look(meter: LoadMeter, device: torch.device, window_s: float = LOOK_WINDOW_S) -> Look:
    """The machine as `meter` (started earlier, at the run's set-up) saw it, over at least
    `window_s`."""
    time.sleep(max(0.0, window_s - (time.monotonic() - meter.start_wall)))
    on_gpu = device.type == "cuda"
    return Look(
        usable_cores(),
        round(meter.busy_frac(), 4),
        gpu_other_processes(device.index or 0) if on_gpu else None,
        gpu_utilization(device.index or 0) if on_gpu else None,
    )


def threads_for(seen: Look, threads_now: int) -> int | None:
    """Torch threads no more than the cores this process may use (torch counts its affinity, not its
    cgroup's quota), and on a busy CPU than the free ones (None: keep torch's): a parallel op waits
    for its slowest thread, and a thread on a busy core, or past the quota, is slow (a small step
    ran ~1.8x slower with one thread too many)."""
    cores = seen.free_cores() if seen.cpu_busy else seen.cores
    return cores if cores < threads_now else None


def seen_text(seen: Look, device: torch.device) -> str:
    cores = f"{seen.cores} core{'s' if seen.cores != 1 else ''}"
    gpu = (
        f"; {seen.gpu_other_procs} other process(es) hold {device}" if seen.gpu_other_procs else ""
    )
    if seen.gpu_util_frac is not None:
        gpu += f"; {device} {seen.gpu_util_frac:.0%} utilized"
    return f"other processes used {seen.busy_frac:.0%} of the {cores}{gpu}"


def look_line(seen: Look, threads: tuple[int, int] | None, device: torch.device) -> str:
    """One line before the first case: what else used the machine and what that does to the
    figures."""
    if not seen.busy:
        moved = (
            f"; torch threads {threads[0]} -> {threads[1]} (the cores this process may use)"
            if threads
            else ""
        )
        return f"gpubench: machine quiet before the first case ({seen_text(seen, device)}){moved}"
    moved = (
        f"torch threads {threads[0]} -> {threads[1]} (the free cores); "
        if threads is not None
        else ""
    )
    return (
        f"gpubench: machine busy before the first case: {seen_text(seen, device)} — "
        f"{moved}figures may read slow and their rows are flagged busy; --wait-quiet 10m waits "
        "for a quieter machine first"
    )


def wait_quiet(
    device: torch.device,
    wait_s: float,
    say: Callable[[str], None],
    now: Callable[[], float] = time.monotonic,
) -> Look:
    """Waits up to `wait_s` for the machine to turn quiet, looking once a second; the last look
    either way."""
    give_up_s = now() + wait_s
    seen = look(LoadMeter(), device, WAIT_POLL_S)
    if seen.busy:
        say(
            f"gpubench: waiting up to {wait_s:.0f} s for a quiet machine "
            f"({seen_text(seen, device)})"
        )
    while seen.busy and now() < give_up_s:
        seen = look(LoadMeter(), device, WAIT_POLL_S)
    if seen.busy:
        say(f"gpubench: still busy after {wait_s:.0f} s: measuring anyway")
    return seen
