"""The bounds a run keeps on its builds from outside them: code stuck in one C call with the
in-process cut's signals blocked is cut at the run's budget, and no build outlives its run, whatever
it blocked. The builds here run a test file of the user's (`--tests`) that blocks SIGALRM, SIGTERM
and SIGINT, then sleeps in C."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from runs import build_processes, gpubench_run

from gpubench.harness.budget.clock import grace_s
from gpubench.harness.processes.launch import CUT_GRACE_S

STUCK_IN_C = """
import ctypes
import signal


def test_stuck(gpubench):
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGTERM, signal.SIGINT})
    gpubench.measure(lambda: ctypes.CDLL(None).sleep(1000), name="stuck")
"""


def stuck_tests(tmp_path: Path) -> Path:
    path = tmp_path / "test_stuck.py"
    path.write_text(STUCK_IN_C)
    return path


def blocks_sigterm(pid: int) -> bool:
    """Whether the process's main thread blocks SIGTERM: the stuck test has begun."""
    try:
        mask = next(
            line
            for line in Path(f"/proc/{pid}/status").read_text().splitlines()
            if line.startswith("SigBlk:")
        )
    except (OSError, StopIteration):
        return False
    return bool(int(mask.split()[1], 16) & (1 << (signal.SIGTERM - 1)))


def descendants_once_stuck(
    proc: subprocess.Popen[str], limit_s: float = 120
) -> list[psutil.Process]:
    """Every process under the run once its build is stuck in the test's C call (a Python handler
    still runs in the main thread until then, whatever it blocked)."""
    deadline = time.monotonic() + limit_s
    while proc.poll() is None and time.monotonic() < deadline:
        if any(blocks_sigterm(build.pid) for build in build_processes(proc.pid)):
            break
        time.sleep(0.05)
    # from its mask to its sleep: the measurement's first call, a few lines on
    time.sleep(2.0)
    return psutil.Process(proc.pid).children(recursive=True)


def left_alive(tree: list[psutil.Process], within_s: float) -> list[str]:
    """What of `tree` still runs `within_s` from now (named), each then killed: never left to spin
    on."""
    _, alive = psutil.wait_procs(tree, timeout=within_s)
    running = []
    for process in alive:
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                running.append(" ".join(process.cmdline()))
            process.kill()
        except psutil.NoSuchProcess:
            continue
    return running


@pytest.mark.process
def test_a_test_stuck_in_c_with_the_cuts_signals_blocked_is_cut_from_outside_at_the_budget(
    tmp_path,
):
    # the in-process cut is a SIGALRM: it never reached this test, and the run hung for good
    budget_s = 5.0
    started = time.monotonic()
    proc = gpubench_run(
        tmp_path,
        "--tests",
        str(stuck_tests(tmp_path)),
        "--budget",
        "5s",
        "--run-id",
        "cut",
        "--no-report",
    )
    tree = descendants_once_stuck(proc)
    # the cut's wait, its SIGTERM's grace, and the run's own start
    limit_s = budget_s + grace_s(budget_s) + 30
    try:
        _, err = proc.communicate(timeout=max(1.0, limit_s - (time.monotonic() - started)))
    except subprocess.TimeoutExpired:
        proc.kill()
        left_alive(tree, 1)
        pytest.fail(f"the run was not cut within {limit_s:.0f} s: {proc.communicate()[1][-2000:]}")
    # a case cut past the budget fails the run, as the in-process cut does
    assert proc.returncode == 1, err[-2000:]
    csv_path = tmp_path / "res" / "cut.csv"
    assert err.strip().splitlines()[-1] == (
        "gpubench: budget: build 1 of 1 (in test_stuck.py::test_stuck) did not end within the "
        "run's 5.0 s budget and 40 s more (its code never returned to Python, or blocked the "
        "in-process cut: a C call, signals blocked): cut from outside, killed (SIGKILL) when "
        f"SIGTERM had not ended it within 5 s; 0 rows kept in {csv_path} (each whole) — raise "
        "--budget if it is only slow"
    ), err[-2000:]
    assert not left_alive(tree, 5)


@pytest.mark.process
def test_a_build_that_blocks_sigterm_dies_with_its_run_killed_with_sigkill(tmp_path):
    # its parent-death signal was SIGTERM, which it blocked: it spun on at 100% CPU after its run
    # was gone
    proc = gpubench_run(
        tmp_path, "--tests", str(stuck_tests(tmp_path)), "--run-id", "k9", "--no-report"
    )
    tree = descendants_once_stuck(proc)
    assert build_processes(proc.pid), proc.communicate()[1][-2000:]
    proc.kill()
    # not its pipes' end: a build that outlived it holds them
    proc.wait()
    # the fork server gave it SIGTERM, then SIGKILL
    alive = left_alive(tree, CUT_GRACE_S + 10)
    proc.communicate()
    assert not alive


MIDDLE = """
import sys
from gpubench.harness.processes.launch import Job, ProcessLauncher
ProcessLauncher().run(Job([sys.executable, "-c", sys.argv[1]]))
"""
BLOCKS_SIGTERM = (
    "import signal, time\nsignal.pthread_sigmask(signal.SIG_BLOCK, "
    "{signal.SIGTERM})\ntime.sleep(60)"
)


@pytest.mark.process
def test_a_plain_build_that_blocks_sigterm_dies_with_its_launcher():
    # a plain build (--no-fork) of a run killed with -9: its parent-death signal must be one it
    # cannot block
    middle = subprocess.Popen([sys.executable, "-c", MIDDLE, BLOCKS_SIGTERM])
    deadline = time.monotonic() + 30
    while not (children := psutil.Process(middle.pid).children()) and time.monotonic() < deadline:
        time.sleep(0.05)
    # its mask set
    time.sleep(0.5)
    middle.send_signal(signal.SIGKILL)
    middle.wait()
    assert children and not left_alive(children, 5)
