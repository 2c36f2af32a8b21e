"""A process's start on the wall clock, to the hundredth of a second (not psutil's whole-second boot
time)."""

import time

import psutil
import pytest

from gpubench.harness.processes.started import process_started_s, started_s

# /proc/<pid>/stat of a process whose name holds a space and a parenthesis; field 22 (start) = 12345
# ticks
STAT = (
    "4242 (py (build) 3) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 1 0 0 20 0 1 0 12345 1000 100 "
    + "0 " * 30
)


def test_the_start_is_the_boot_time_from_uptime_plus_the_start_ticks():
    # booted at 1000.875 on the wall clock: /proc/stat's btime would say 1000, a whole second
    assert started_s(STAT, "5000.00 9000.00\n", 6000.875, 100) == pytest.approx(1000.875 + 123.45)


def test_this_process_started_before_now_and_at_most_a_second_after_psutil_says():
    started = process_started_s()
    assert started <= time.time()
    assert psutil.Process().create_time() - 0.02 <= started <= psutil.Process().create_time() + 1.0
