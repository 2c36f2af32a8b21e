"""What the CPUs did while a command ran its builds: the hypervisor's share (CPU steal, /proc/stat) and the load
average. Torch-free; None where the system does not say (no /proc/stat: macOS)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

PROC_STAT = Path("/proc/stat")
STEAL_FIELD = 7  # user nice system idle iowait irq softirq steal guest guest_nice


def cpu_ticks(path: Path = PROC_STAT) -> tuple[int, int] | None:
    """(steal, total) ticks of all CPUs so far, or None where the file is absent or unreadable."""
    try:
        first = path.read_text(encoding="ascii").splitlines()[0].split()
        ticks = [int(value) for value in first[1:9]]  # guest time is counted in user already
    except (OSError, IndexError, ValueError, UnicodeDecodeError):
        return None
    if first[0] != "cpu" or len(ticks) <= STEAL_FIELD:
        return None
    return ticks[STEAL_FIELD], sum(ticks)


def steal_between(start: tuple[int, int] | None, end: tuple[int, int] | None) -> float | None:
    if start is None or end is None or end[1] <= start[1]:
        return None
    return max(0.0, min(1.0, (end[0] - start[0]) / (end[1] - start[1])))


@dataclass
class CpuWatch:
    """Started with the command; `steal_frac()` and `load_avg()` at its end."""

    path: Path = PROC_STAT
    start: tuple[int, int] | None = field(default=None)

    def __post_init__(self) -> None:
        self.start = cpu_ticks(self.path)

    def steal_frac(self) -> float | None:
        return steal_between(self.start, cpu_ticks(self.path))

    @staticmethod
    def load_avg() -> float | None:
        try:
            return os.getloadavg()[0]
        except OSError:
            return None
