"""When this process started, on the wall clock, to the hundredth of a second: what a build's start-up
figure (fork or exec to its first case) is measured from. Torch-free.

psutil's `create_time()` adds the process's start (clock ticks since boot) to the boot time of
/proc/stat, which Linux gives in whole seconds: it reads up to a second early, and every start-up
measured from it up to a second long (0.9 s on the VM where this was found). On Linux the boot time
is taken instead as now minus /proc/uptime (hundredths of a second)."""

from __future__ import annotations

import os
import time


def started_s(stat_text: str, uptime_text: str, now_s: float, ticks_per_s: int) -> float:
    """The start of the process whose /proc/<pid>/stat is `stat_text`, given /proc/uptime's text read at
    `now_s` (wall clock). The process name, in parentheses, may hold spaces: fields are counted after it."""
    after_name = stat_text.rsplit(")", 1)[1].split()
    start_ticks = int(after_name[19])  # field 22 of proc(5), the third after the name being field 3
    boot_s = now_s - float(uptime_text.split()[0])
    return boot_s + start_ticks / ticks_per_s


def process_started_s() -> float:
    """This process's start on the wall clock (psutil's, elsewhere than Linux)."""
    try:
        with open("/proc/self/stat", encoding="ascii", errors="replace") as stat, open("/proc/uptime", encoding="ascii") as uptime:
            stat_text, uptime_text, now_s = stat.read(), uptime.read(), time.time()
        return started_s(stat_text, uptime_text, now_s, os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        import psutil

        return psutil.Process().create_time()
