"""This process's start on the wall clock, to 0.01 s: what a build's start-up figure is measured
from. Torch-free. psutil's create_time() uses /proc/stat's boot time in whole seconds (start-ups
read up to 0.9 s long on a VM), so on Linux the boot time is now minus /proc/uptime instead."""

from __future__ import annotations

import os
import time


def started_s(stat_text: str, uptime_text: str, now_s: float, ticks_per_s: int) -> float:
    """The process's start from its /proc/<pid>/stat and /proc/uptime read at `now_s` (the name may
    hold spaces)."""
    after_name = stat_text.rsplit(")", 1)[1].split()
    # field 22 of proc(5), the third after the name being field 3
    start_ticks = int(after_name[19])
    boot_s = now_s - float(uptime_text.split()[0])
    return boot_s + start_ticks / ticks_per_s


def process_started_s() -> float:
    """This process's start on the wall clock (psutil's, elsewhere than Linux)."""
    try:
        with (
            open("/proc/self/stat", encoding="ascii", errors="replace") as stat,
            open("/proc/uptime", encoding="ascii") as uptime,
        ):
            stat_text, uptime_text, now_s = stat.read(), uptime.read(), time.time()
        return started_s(stat_text, uptime_text, now_s, os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        import psutil

        return psutil.Process().create_time()
