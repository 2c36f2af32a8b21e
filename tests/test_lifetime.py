"""How a run ends when it is stopped: SIGTERM to `gpubench run`, to its whole process group or
inside a case under pytest unwinds the case in progress and leaves one line, whole rows and no
process behind; scratch folders of runs that were killed are swept later."""

import os
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest
from runs import GPUBENCH, cmdlines, gpubench_run, processes_of, run_bench_process

from gpubench.harness.processes.lifetime import (
    handlers_installed,
    run_folder_prefix,
    sweep_dead_run_folders,
)
from gpubench.harness.records.results import count_rows
from gpubench.harness.records.results_reader import read_rows

pytest_plugins = ["pytester"]


@pytest.mark.process
def test_sigterm_to_gpubench_run_stops_its_build_process_too(tmp_path):
    """The build process dies with gpubench run: nothing goes on appending rows after it."""
    proc = subprocess.Popen(
        [
            *GPUBENCH,
            "run",
            "--device",
            "cpu",
            "--profile",
            "smoke",
            "-k",
            "matmul or elementwise or inference",
            "--results-dir",
            str(tmp_path),
            "--run-id",
            "term",
            "--no-report",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 60
    while time.time() < deadline and not psutil.Process(proc.pid).children():
        time.sleep(0.2)
    children = psutil.Process(proc.pid).children(recursive=True)
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err[-2000:]
    # the line names it only where the build made it
    csv_path = tmp_path / "term.csv"
    assert (
        f"gpubench: interrupted: {count_rows(csv_path)} rows kept in {csv_path}"
        if csv_path.exists()
        else "gpubench: interrupted: no rows were written"
    ) in err, err[-2000:]
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive


@pytest.mark.process
def test_sigterm_to_the_group_during_a_ddp_case_unwinds_it(tmp_path):
    """SIGTERM to gpubench run's whole process group while torchrun runs (a job scheduler stopping
    the job): one line, exit 143, the finished row whole, no torchrun or rank left, and the case's
    workdir removed (the build process unwinds the case instead of dying mid-case)."""
    (tmp_path / "tmp").mkdir()
    proc = gpubench_run(
        tmp_path,
        "--nproc",
        "2",
        "--dataset",
        "synthetic",
        "-k",
        "ddp-x1 or ddp-x2",
        "--run-id",
        "term",
        "--no-report",
        start_new_session=True,
        # the case's gpubench-ddp-* workdir goes there
        env=dict(os.environ, TMPDIR=str(tmp_path / "tmp")),
    )
    csv_path = tmp_path / "res" / "term.csv"
    deadline, tree = time.monotonic() + 120, []
    # the x1 row written, the x2 launch running
    while time.monotonic() < deadline and proc.poll() is None:
        tree = psutil.Process(proc.pid).children(recursive=True)
        if (
            csv_path.exists()
            and len(read_rows(csv_path)) == 1
            and any("--nproc_per_node=2" in line for line in cmdlines(tree))
        ):
            break
        time.sleep(0.2)
    else:
        pytest.fail(f"the x2 launch never started: {proc.communicate()[1][-2000:]}")
    # the ranks are up
    time.sleep(1.5)
    tree = psutil.Process(proc.pid).children(recursive=True)
    os.killpg(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 143, err[-2000:]
    assert err.strip().splitlines() == [
        f"gpubench: interrupted: 1 rows kept in {csv_path} (each whole); re-run with "
        "another --run-id for the rest"
    ]
    assert "Traceback" not in out + err
    assert [(r["case_id"], r["status"]) for r in read_rows(csv_path)] == [
        ("ddp/ddp-x1-gloo-bs128", "ok")
    ]
    gone, alive = psutil.wait_procs(tree, timeout=15)
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE], cmdlines(alive)
    # torchrun and the ranks name the workdir in their command lines
    assert not processes_of(tmp_path)
    assert not list((tmp_path / "tmp").glob("gpubench-*"))


# Three cases; the second sends SIGTERM to its own process while it is timed.
SIGTERM_IN_SECOND_CASE_BENCH = """
import os
import signal
import sys
from dataclasses import dataclass
from typing import ClassVar

from gpubench.harness.measurement.cases import Case
from gpubench.harness.measurement.measure import Timed

gpubench_workload = sys.modules[__name__]


@dataclass(frozen=True)
class TinyCase(Case):
    workload: ClassVar[str] = "matmul"
    size: int


def cases(ctx):
    return [TinyCase(8), TinyCase(16), TinyCase(32)]


def terminate_self():
    os.kill(os.getpid(), signal.SIGTERM)


def set_up(case, ctx):
    return Timed(fn=terminate_self if case.size == 16 else (lambda: None))


def test_tiny(case, gpubench):
    gpubench.run(case)
"""


@pytest.mark.process
def test_sigterm_under_pytest_unwinds_the_case_and_ends_with_one_line(one_case):
    """SIGTERM inside a case (here the case sends it itself): the case writes no row, the rest do
    not run, exit 143, one line and no interrupt banner or traceback (pytest's interrupt report can
    crash on a frame inside torch)."""
    one_case.makepyfile(bench_tiny=SIGTERM_IN_SECOND_CASE_BENCH)
    result = run_bench_process(one_case)
    assert result.ret == 143, result.stdout.str()[-2000:]
    (csv_path,) = [p for p in (one_case.path / "out").glob("*.csv") if p.name != "taken.csv"]
    assert [r["case_id"] for r in read_rows(csv_path)] == ["matmul/n8"]
    lines = [line for line in result.stderr.lines if line.strip()]
    assert lines == [
        f"gpubench: SIGTERM: 1 rows kept in {csv_path} (each whole); the case in progress was not "
        "recorded"
    ], lines
    assert "Traceback" not in result.stdout.str() and not [
        line for line in result.outlines if line.startswith("!")
    ]
    result.assert_outcomes(passed=1, skipped=1)


@pytest.mark.process
def test_scratch_folders_of_killed_runs_are_swept_and_live_ones_kept(tmp_path):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    killed = tmp_path / f"{run_folder_prefix(int(dead))}abc"
    live = tmp_path / f"{run_folder_prefix(os.getpid())}def"
    other = tmp_path / "gpubench-run-notapid"
    # another pid namespace's live run looks dead: spared while young
    young = tmp_path / f"{run_folder_prefix(int(dead))}young"
    for folder in (killed, live, other, young):
        folder.mkdir()
        (folder / "builds").write_text("4")
    hour_ago = time.time() - 3600
    for folder in (killed, live, other):
        os.utime(folder, (hour_ago, hour_ago))
    # another user's killed run: theirs to sweep, even when we are root
    theirs = tmp_path / f"{run_folder_prefix(int(dead))}theirs"
    theirs.mkdir()
    os.utime(theirs, (hour_ago, hour_ago))
    if os.getuid() == 0:
        os.chown(theirs, 12345, 12345)
    assert sweep_dead_run_folders(tmp_path) == [killed] + ([] if os.getuid() == 0 else [theirs])
    assert not killed.exists() and live.exists() and other.exists() and young.exists()


# A build that checks SIGHUP is still ignored (as its run's parent set it), then lives a while: 9
# when it is not.
HUP_STAYS_IGNORED = (
    "import signal, sys, time\nignored = signal.getsignal(signal.SIGHUP) is signal.SIG_IGN\n"
    "time.sleep(1.5)\nsys.exit(0 if ignored else 9)"
)


@pytest.mark.process
def test_a_run_under_nohup_outlives_the_terminal_closing():
    # `nohup gpubench run`: the launcher put its own SIGHUP handler over nohup's SIG_IGN and passed
    # the hang-up on, and the run stopped with 129
    from gpubench.harness.processes.build_runs import run_builds
    from gpubench.harness.processes.launch import Job, ProcessLauncher

    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    # the terminal closes mid-build
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGHUP))
    timer.start()
    try:
        outcome = run_builds(
            ProcessLauncher(),
            lambda build, builds: Job([sys.executable, "-c", HUP_STAYS_IGNORED], hold_sigint=True),
            (2, 3, 4, 129),
        )
        # and nothing put over it afterwards either
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        timer.join()
        signal.signal(signal.SIGHUP, previous)
    assert (outcome.code, outcome.stopped, outcome.notes) == (0, False, [])


def test_handlers_are_put_back_and_a_signal_the_parent_ignored_stays_ignored():
    """`nohup` starts a run with SIGHUP ignored: a handler put over it ended the run as its terminal
    closed."""

    def mine(signum: int, frame: object) -> None:
        raise AssertionError("not called")

    hangup, term = signal.signal(signal.SIGHUP, signal.SIG_IGN), signal.getsignal(signal.SIGTERM)
    try:
        with handlers_installed(mine):
            assert (
                signal.getsignal(signal.SIGTERM) is mine
                and signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            )
        assert (
            signal.getsignal(signal.SIGTERM) is term
            and signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        )
    finally:
        signal.signal(signal.SIGHUP, hangup)
