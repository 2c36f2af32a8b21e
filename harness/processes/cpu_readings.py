"""What the CPUs did while a command ran its builds: the hypervisor's share (CPU steal) and the load
average. Torch-free; None where the system does not say (psutil knows steal on Linux only)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field


def cpu_seconds() -> tuple[float, float] | None:
    """(steal, total) seconds of all CPUs so far, or None where the system does not say."""
    import psutil

    try:
        times = psutil.cpu_times()
    # no /proc/stat
    except OSError:
        return None
    if not hasattr(times, "steal"):
        return None
    # guest time is counted in user already
    return times.steal, sum(
        seconds for name, seconds in times._asdict().items() if not name.startswith("guest")
    )


def steal_between(
    start: tuple[float, float] | None, end: tuple[float, float] | None
) -> float | None:
    if start is None or end is None or end[1] <= start[1]:
        return None
    return max(0.0, min(1.0, (end[0] - start[0]) / (end[1] - start[1])))


@dataclass
class CpuWatch:
    """Started with the command; `steal_frac()` and `load_avg()` at its end."""

    start: tuple[float, float] | None = field(default_factory=cpu_seconds)

    def steal_frac(self) -> float | None:
        return steal_between(self.start, cpu_seconds())

    @staticmethod
    def load_avg() -> float | None:
        try:
            return os.getloadavg()[0]
        except OSError:
            return None
