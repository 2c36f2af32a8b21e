"""What `gpubench run` shows and leaves when its build processes end: one pytest-benchmark table for
the whole run, a build process killed (kill -9, the out-of-memory killer) named with the rows kept,
and a closed terminal (SIGHUP) leaving no scratch or DDP folder and a written environment
sidecar."""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest
from runs import GPUBENCH, REPO, build_processes, cmdlines, gpubench_run

from gpubench.harness.processes import launch
from gpubench.harness.processes.build_runs import BuildsOutcome, run_builds
from gpubench.harness.processes.launch import Completed, Job, ProcessLauncher, signal_death
from gpubench.harness.processes.protocol import BuildAnswer
from gpubench.harness.processes.torchrun import TorchrunLauncher
from gpubench.harness.records.results import count_rows
from gpubench.harness.records.results_reader import read_rows


@pytest.mark.process
def test_a_two_build_run_tells_its_story_in_a_few_lines(tmp_path):
    """The console of a run: its first lines once, a line per case of the first build, one line per
    build's end, then the answer, the headline figures, the files and what to run next; none of
    pytest's per-build output."""
    proc = gpubench_run(
        tmp_path,
        "--profile",
        "quick",
        "--builds",
        "2",
        "-k",
        "matmul and n512 and (fp32 or tf32)",
        # quick: smoke rows hold no figure
        "--run-id",
        "two",
        "--budget",
        "none",
    )
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    lines = out.splitlines()
    assert sum(line.startswith("gpubench: device cpu") for line in lines) == 1, out
    # the first build's, not the second
    assert sum(line.startswith("  matmul/fp32-n512: ") for line in lines) == 1, out
    # counted by reason
    assert sum(line.startswith("  skipped ") and "tf32" in line for line in lines) == 1, out
    assert [line.split(":")[1] for line in lines if " case(s) measured" in line] == [
        " build 1 of 2",
        " build 2 of 2",
    ]
    assert (
        "Name (time in" not in out and "PASSED" not in out and "test session starts" not in out
    ), out
    # no empty line between builds
    assert "" not in lines[:-1], out
    answer = next(i for i, line in enumerate(lines) if line.startswith("gpubench: Answer: "))
    assert lines[answer + 1].lstrip().startswith("runs · torch") and "matmul fp32, best" in out, out
    assert lines[-3].startswith("gpubench: rows -> ") and lines[-2].startswith(
        "gpubench: report -> "
    ), out
    assert lines[-1].startswith("gpubench: next: "), out
    assert sorted(p.name for p in (tmp_path / "res").iterdir()) == [
        "two-report",
        "two.csv",
        "two.env.json",
        "two.exit.json",
    ]
    assert json.loads((tmp_path / "res" / "two.exit.json").read_text()) == {"exit_code": 0}


@pytest.mark.process
def test_a_verbose_run_prints_pytests_output_and_one_benchmark_table(tmp_path):
    proc = gpubench_run(
        tmp_path, "--builds", "2", "-k", "matmul and fp32", "--no-report", "--run-id", "two", "-v"
    )
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    # a case
    assert len(re.findall(r"^-+ benchmark 'matmul': 1 tests -+$", out, re.MULTILINE)) == 1, out[
        -3000:
    ]
    # one header for the run, not one per build
    assert len(re.findall(r"^Name \(time in", out, re.MULTILINE)) == 1
    assert "test_matmul[fp32-n64-b0] PASSED" in out and "test_matmul[fp32-n64-b1] PASSED" in out
    # the builds' JSON stayed in the scratch folder; the run recorded how it ended (a fleet reads
    # it)
    assert sorted(p.name for p in (tmp_path / "res").iterdir()) == [
        "two.csv",
        "two.env.json",
        "two.exit.json",
    ]


@pytest.mark.process
def test_a_build_process_killed_with_sigkill_is_named_with_the_rows_kept(tmp_path):
    proc = gpubench_run(
        tmp_path, "--builds", "3", "-k", "matmul or elementwise", "--run-id", "killed"
    )
    csv_path = tmp_path / "res" / "killed.csv"
    deadline = time.monotonic() + 240
    while (
        time.monotonic() < deadline
        and proc.poll() is None
        and not (csv_path.exists() and count_rows(csv_path) >= 1)
    ):
        time.sleep(0.1)
    (build,) = build_processes(proc.pid)
    # as kill -9, or the kernel's out-of-memory killer under a memory cap
    build.kill()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGKILL, err[-2000:]
    # what the killed build itself had started (torch 2.5's compile workers) is killed by the run
    # and named apart
    lines = [
        line
        for line in err.splitlines()
        if line.startswith("gpubench:")
        and not line.startswith("gpubench: killed what the build process left")
    ]
    assert len(lines) == 1 and re.fullmatch(
        r"gpubench: build [123] of 3 was killed by SIGKILL \(kill -9, or the kernel's "
        rf"out-of-memory killer .*\): {count_rows(csv_path)} rows kept in "
        rf"{re.escape(str(csv_path))} \(each whole\); the case in progress was not recorded .*",
        lines[0],
    ), lines
    # each row whole
    assert all(row["status"] for row in read_rows(csv_path))
    # no report of a run that died
    assert "report ->" not in out


def test_signal_deaths_are_named_from_either_form_of_exit_code():
    assert signal_death(-9).startswith("SIGKILL (") and signal_death(137) == signal_death(-9)
    assert signal_death(134).startswith("SIGABRT (") and "memory cap" in signal_death(-6)
    assert signal_death(1) == "" and signal_death(0) == "" and signal_death(75) == ""


@pytest.mark.process
def test_sighup_to_gpubench_run_during_a_ddp_case_leaves_no_folder_and_writes_the_sidecar(tmp_path):
    """The terminal closed while torchrun runs: the build process unwinds the case (its workdir
    removed), closes its session, and gpubench run removes its scratch folder: exit 129."""
    (tmp_path / "tmp").mkdir()
    proc = gpubench_run(
        tmp_path,
        "--dataset",
        "synthetic",
        "-k",
        "ddp-x1",
        "--run-id",
        "hup",
        "--no-report",
        # the scratch and DDP folders go there
        env=dict(os.environ, TMPDIR=str(tmp_path / "tmp")),
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if any(
            "--nproc_per_node=1" in line
            for line in cmdlines(psutil.Process(proc.pid).children(recursive=True))
        ):
            break
        time.sleep(0.2)
    else:
        pytest.fail(f"the DDP launch never started: {proc.communicate()[1][-2000:]}")
    assert list((tmp_path / "tmp").glob("gpubench-ddp-*")) and list(
        (tmp_path / "tmp").glob("gpubench-run-*")
    )
    # to gpubench run only: it passes it on to its build process
    proc.send_signal(signal.SIGHUP)
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 128 + signal.SIGHUP, err[-2000:]
    assert err.strip().splitlines()[-1].startswith("gpubench: interrupted: 0 rows kept in"), err[
        -2000:
    ]
    assert "Traceback" not in out + err
    # no scratch (gpubench-run-*) or DDP (gpubench-ddp-*) folder left
    assert not list((tmp_path / "tmp").glob("gpubench-*"))
    sidecar = json.loads((tmp_path / "res" / "hup.env.json").read_text())
    assert sidecar["fingerprint"]


# ProcessLauncher against tiny python children: a build that stops itself (SIGSTOP, as a stray kill
# -STOP or a debugger would), one that ignores Ctrl-C, one that waits for it. (SIGINT unblocked
# first, as gpubench.harness.processes.build_main does: run_builds starts its builds with it
# blocked)
STOPS_ITSELF = (
    "import os, signal, time\nsignal.pthread_sigmask(signal.SIG_UNBLOCK, "
    "{signal.SIGINT})\nos.kill(os.getpid(), signal.SIGSTOP)\ntime.sleep(30)"
)
IGNORES_CTRL_C = (
    "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('ready', "
    "flush=True)\ntime.sleep(30)"
)
WAITS_FOR_CTRL_C = (
    "import sys, time\ntry:\n    time.sleep(30)\nexcept KeyboardInterrupt:\n    sys.exit(2)"
)


def signal_me(after_s: float, *signums: int, every_s: float = 1.3) -> list[threading.Timer]:
    """SIGINT (etc.) to this test's process alone, `after_s` from now, one each `every_s` (more than
    launch.REPEAT_S: a second Ctrl-C, not the first one twice): as `kill -INT <pid>`."""
    timers = [
        threading.Timer(after_s + every_s * index, os.kill, (os.getpid(), signum))
        for index, signum in enumerate(signums)
    ]
    for timer in timers:
        timer.start()
    return timers


def end_children() -> None:
    for child in psutil.Process().children():
        child.resume()
        child.kill()


def launched(script: str, launcher: ProcessLauncher | None = None) -> tuple[float, Completed]:
    """(seconds, outcome) of one launch; a child still alive after 20 s is continued and killed
    (the old launcher waited for a stopped child for good)."""
    started_s = time.monotonic()
    job = Job([sys.executable, "-c", script])
    guard = threading.Timer(20, end_children)
    guard.start()
    try:
        done = (launcher or ProcessLauncher()).run(job)
    finally:
        guard.cancel()
    return time.monotonic() - started_s, done


@pytest.mark.process
def test_ctrl_c_ends_a_stopped_build_at_once_and_names_it():
    signal_me(1.0, signal.SIGINT)
    took_s, done = launched(STOPS_ITSELF)
    assert took_s < 5, took_s
    assert done.signal == signal.SIGINT and done.stalled == (
        "had been stopped (state T): continued so it could act on SIGINT"
    )


@pytest.mark.process
def test_a_build_stopped_longer_than_its_limit_is_killed_and_named():
    took_s, done = launched(STOPS_ITSELF, ProcessLauncher(stopped_limit_s=1.0))
    assert took_s < 5 and done.code == -signal.SIGKILL and done.signal == 0
    assert done.stalled == "made no progress: it was stopped (state T, SIGSTOP) for 1 s: killed"


TERMINAL_SCRIPT = """
import json, sys, termios
from gpubench.harness.processes.launch import Job, ProcessLauncher
attrs = termios.tcgetattr(0)
# stty tostop: a background process group that writes is stopped (SIGTTOU)
attrs[3] |= termios.TOSTOP
termios.tcsetattr(0, termios.TCSANOW, attrs)
build = [sys.executable, "-c", "print('a build writes'); print(input())"]
done = ProcessLauncher(stopped_limit_s=2.0).run(Job(build))
open(sys.argv[1], "w").write(json.dumps([done.code, done.stalled]))
"""


@pytest.mark.process
def test_a_build_may_write_to_a_terminal_that_stops_background_writers(tmp_path):
    """Builds run in a process group of their own, in the background of the terminal: under `stty
    tostop` their first print stopped them (SIGTTOU), and a read (pdb, input()) did too, until the
    stopped-build limit killed them having measured nothing. Writes go through; a read fails."""
    import fcntl
    import select
    import termios

    def terminal_of_its_own() -> None:
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    master, slave = os.openpty()
    outcome = tmp_path / "outcome.json"
    proc = subprocess.Popen(
        [sys.executable, "-c", TERMINAL_SCRIPT, str(outcome)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        preexec_fn=terminal_of_its_own,
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    os.close(slave)
    seen = b""
    while proc.poll() is None or select.select([master], [], [], 0)[0]:
        if select.select([master], [], [], 0.2)[0]:
            try:
                seen += os.read(master, 4096)
            # EIO: every writer closed the terminal
            except OSError:
                break
    proc.wait(timeout=30)
    os.close(master)
    code, stalled = json.loads(outcome.read_text())
    # input() failed (EOFError/EIO), not stopped
    assert stalled == "" and code == 1, seen.decode(errors="replace")
    assert b"a build writes" in seen


@pytest.mark.process
def test_a_build_that_ignores_ctrl_c_is_killed_at_the_second(monkeypatch):
    # the second Ctrl-C, not the grace, ends it
    monkeypatch.setattr(launch, "STOP_GRACE_S", 60.0)
    signal_me(1.0, signal.SIGINT, signal.SIGINT)
    took_s, done = launched(IGNORES_CTRL_C)
    assert (
        took_s < 5
        and done.code == -signal.SIGKILL
        and done.stalled == "was killed at a second SIGINT"
    )


UNWINDS_SLOWLY = (
    "import sys, time\ntry:\n    time.sleep(30)\nexcept KeyboardInterrupt:\n    time.sleep(1.5)\n "
    "   sys.exit(2)"
)


@pytest.mark.process
def test_one_ctrl_c_arriving_twice_lets_the_build_unwind():
    """A terminal's Ctrl-C reaches gpubench run, and gpubench fleet, stopping its local job, sends
    it SIGINT again a moment later: that was read as a second Ctrl-C and the build was killed
    mid-unwind."""
    signal_me(1.0, signal.SIGINT, signal.SIGINT, every_s=0.05)
    took_s, done = launched(UNWINDS_SLOWLY)
    assert (done.code, done.stalled, done.signal) == (2, "", signal.SIGINT) and took_s < 10


@pytest.mark.process
def test_a_build_that_ignores_ctrl_c_is_killed_after_the_grace(monkeypatch):
    monkeypatch.setattr(launch, "STOP_GRACE_S", 1.0)
    signal_me(1.0, signal.SIGINT)
    took_s, done = launched(IGNORES_CTRL_C)
    assert (
        took_s < 6
        and done.code == -signal.SIGKILL
        and done.stalled == "did not stop within 1 s of SIGINT: killed"
    )


@pytest.mark.process
def test_sigint_to_this_process_alone_reaches_the_build():
    # kill -INT <gpubench run's pid> (a CI runner): the old wait loop swallowed it and the build ran
    # on
    before = signal.getsignal(signal.SIGINT)
    signal_me(1.0, signal.SIGINT)
    took_s, done = launched(WAITS_FOR_CTRL_C)
    assert took_s < 5 and done.code == 2 and done.signal == signal.SIGINT
    # the caller's handler again afterwards
    assert signal.getsignal(signal.SIGINT) is before


def guarded_builds(launcher: ProcessLauncher) -> BuildsOutcome:
    """run_builds over one self-stopping build; freed after 20 s (the old launcher waited for
    good)."""
    guard = threading.Timer(20, end_children)
    guard.start()
    try:
        return run_builds(
            launcher,
            lambda build, builds: Job([sys.executable, "-c", STOPS_ITSELF], hold_sigint=True),
            (2, 3, 4),
        )
    finally:
        guard.cancel()


@pytest.mark.process
def test_a_run_of_builds_stops_after_the_build_a_signal_came_in_and_names_a_stopped_one():
    signal_me(1.0, signal.SIGINT)
    outcome = guarded_builds(ProcessLauncher())
    assert (outcome.code, outcome.stopped) == (2, True)
    assert outcome.notes == [
        "build 1 of 1 had been stopped (state T): continued so it could act on SIGINT"
    ]


@pytest.mark.process
def test_a_run_of_builds_names_the_build_killed_for_being_stopped():
    outcome = guarded_builds(ProcessLauncher(stopped_limit_s=1.0))
    assert outcome.code == 128 + signal.SIGKILL and outcome.died == (
        "build 1 of 1 made no progress: it was stopped (state T, SIGSTOP) for 1 s: killed"
    )


def test_the_stopped_limit_is_sized_from_the_profile():
    assert (
        launch.stopped_limit_s("smoke")
        < launch.stopped_limit_s("quick")
        < launch.stopped_limit_s("full")
    )


def run_until_a_build_started(tmp_path: Path, *args: str, builds: int = 2) -> subprocess.Popen[str]:
    """`gpubench run` with Ctrl-C at its default in a process group of its own (as from a terminal),
    returned once its `builds`-th build process has started."""
    proc = subprocess.Popen(
        [
            *GPUBENCH,
            "run",
            "--device",
            "cpu",
            "--profile",
            "smoke",
            "--results-dir",
            str(tmp_path / "res"),
            "-k",
            "matmul and fp32-n64",
            "--no-report",
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        # PLW1509: no threads yet
        preexec_fn=lambda: (
            signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
            os.setsid(),
        ),
    )
    seen: set[int] = set()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and len(seen) < builds:
        seen |= {child.pid for child in build_processes(proc.pid)}
        time.sleep(0.02)
    return proc


@pytest.mark.process
def test_sigint_to_gpubench_run_alone_stops_it_as_a_ctrl_c(tmp_path):
    proc = run_until_a_build_started(tmp_path, "--builds", "3", "--run-id", "int")
    # build 2 in progress: a forked build of this one case lasts ~0.5 s on a quiet machine, ~2 s on
    # a busy one
    time.sleep(0.1)
    # the run's process alone, not its group
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "build 3 of 3" not in out and "Traceback" not in out + err
    csv_path = tmp_path / "res" / "int.csv"
    # the Ctrl-C may land before the first row: then no file is named
    said = (
        f"{count_rows(csv_path)} rows kept in {csv_path} (each whole); re-run with another "
        "--run-id for the rest"
        if csv_path.exists()
        else "no rows were written"
    )
    assert err.strip().splitlines()[-1] == f"gpubench: interrupted: {said}"


@pytest.mark.process
def test_an_existing_benchmark_json_outside_the_checkout_still_runs_the_cases(tmp_path):
    existing = tmp_path / "existing.json"
    # pytest took "/" as the common folder of the command line's paths: no config, 0 cases
    existing.write_text("{}")
    proc = subprocess.run(
        [
            *GPUBENCH,
            "run",
            "--device",
            "cpu",
            "--profile",
            "smoke",
            "--results-dir",
            str(tmp_path / "res"),
            "-k",
            "matmul and fp32-n64",
            "--no-report",
            "--run-id",
            "j",
            "--benchmark-json",
            str(existing),
        ],
        check=False,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (
        count_rows(tmp_path / "res" / "j.csv") == 1
        and json.loads(existing.read_text())["benchmarks"]
    )


@dataclass
class ExitsWith:
    """A launcher whose builds exit with the given codes; each answers `builds`, as pytest's
    collection does."""

    codes: list[int]
    builds: int = 3
    started: int = 0

    def run(self, job: Job) -> Completed:
        self.started += 1
        return Completed(
            self.codes[self.started - 1], answer=BuildAnswer(self.started - 1, self.builds)
        )


@pytest.mark.parametrize(
    ("codes", "code", "note"),
    [
        (
            [0, 5, 0],
            0,
            "build 2 of 3 ended with exit 5 (it selected no case, though the first build's "
            "collection asked for more builds): no later build started",
        ),
        (
            [0, 4, 0],
            4,
            "build 2 of 3 ended with exit 4 (a usage error, above): no later build started",
        ),
        (
            [0, 3, 0],
            3,
            "build 2 of 3 ended with exit 3 (pytest's internal error, above): no later build "
            "started",
        ),
        # an earlier build's failed case is not forgotten when a later one cuts the run short: exit
        # 1, not 0
        (
            [1, 5, 0],
            1,
            "build 2 of 3 ended with exit 5 (it selected no case, though the first build's "
            "collection asked for more builds): no later build started",
        ),
    ],
)
def test_a_later_build_that_stops_the_run_is_named(codes, code, note):
    launcher = ExitsWith(codes)
    outcome = run_builds(launcher, lambda build, builds: Job(["build"]), (2, 3, 4))
    assert (outcome.code, outcome.stopped, outcome.cut_short, launcher.started) == (
        code,
        True,
        note,
        2,
    )


def test_the_first_builds_usage_error_stays_pytests_one_line():
    outcome = run_builds(ExitsWith([4]), lambda build, builds: Job(["build"]), (2, 3, 4))
    assert (outcome.code, outcome.notes, outcome.cut_short) == (4, [], "")


STOPS_AT_BUILD_2 = """
import pytest


from gpubench.harness.pytest_plugin.build_answer import this_build


def pytest_sessionstart(session):
    if this_build(session.config) == 1:
        pytest.exit("stopped by the test plugin", returncode=4)
"""


@pytest.mark.process
def test_gpubench_run_names_a_later_build_that_stopped_it_with_the_rows_kept(tmp_path):
    (tmp_path / "stopsat2.py").write_text(STOPS_AT_BUILD_2)
    proc = gpubench_run(
        tmp_path,
        "--builds",
        "3",
        "-k",
        "matmul and fp32-n64",
        "--no-report",
        "--run-id",
        "s",
        "-p",
        "stopsat2",
        env=dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{REPO}"),
    )
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 4, err[-2000:]
    csv_path = tmp_path / "res" / "s.csv"
    assert err.strip().splitlines()[-1] == (
        "gpubench: build 2 of 3 ended with exit 4 (a usage error, above): no "
        f"later build started: 1 rows kept in {csv_path} (each whole)"
    )


def test_a_build_ending_itself_with_exit_0_before_its_session_ends_fails_the_run_with_its_line():
    class Vanishes:
        def run(self, job: Job) -> Completed:
            return Completed(0, vanished=True)

    outcome = run_builds(Vanishes(), lambda build, builds: Job(["build"]), (2, 3, 4))
    assert (outcome.code, outcome.stopped) == (1, True)
    assert outcome.died.startswith(
        "build 1 of 1 ended with exit 0 before pytest finished, without a word"
    )


def test_pytests_internal_error_in_a_build_is_named_as_pytest_said_it_without_a_guessed_cause():
    # it was put down to "a test module or conftest that calls sys.exit": any plugin hook that
    # raises ends so too
    outcome = run_builds(ExitsWith([3]), lambda build, builds: Job(["build"]), (2, 3, 4))
    assert outcome.code == 3 and outcome.notes == [
        "build 1 of 3 ended with exit 3, pytest's internal error above"
    ]


@dataclass
class EndsItself:
    """A build whose own code ended its process with `code` (a user thread's os._exit), pytest's
    session unfinished (`session` None) or finished with `session`."""

    code: int
    session: int | None = None

    def run(self, job: Job) -> Completed:
        return Completed(self.code, answer=BuildAnswer(0, 3, exit_code=self.session))


@pytest.mark.parametrize(
    ("launcher", "why"),
    [
        (
            EndsItself(7),
            "a code pytest never gives, before pytest finished: the build's own code (a --model "
            "factory, a conftest, a test or a thread of theirs) ended the process with it "
            "(os._exit(7))",
        ),
        (
            EndsItself(7, session=7),
            "which a plugin or conftest gave pytest (pytest.exit(returncode=7))",
        ),
        (
            EndsItself(7, session=0),
            "a code pytest never gives, after its session ended with 0: an atexit handler or a "
            "plugin's unconfigure ended the process with it",
        ),
    ],
)
def test_a_build_that_ends_with_a_code_neither_pytest_nor_gpubench_gives_is_named(launcher, why):
    # a user thread's os._exit(7) ended the run with 7 and no line, and the next build started
    outcome = run_builds(launcher, lambda build, builds: Job(["build"]), (2, 3, 4))
    assert (outcome.code, outcome.stopped, outcome.died) == (
        1,
        True,
        f"build 1 of 3 ended with exit 7, {why}",
    )


# a process that stops itself, standing in for a stopped torchrun
@pytest.mark.process
def test_a_stopped_torchrun_is_named_not_the_rank_whose_heartbeat_went_quiet():
    stops_itself = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSTOP)"]
    done = TorchrunLauncher().run(
        Job(stops_itself, timeout_s=30, watch=lambda: "rank 1 stopped responding")
    )
    assert done.code == -signal.SIGKILL and not done.timed_out
    assert (
        done.stalled
        == "made no progress: torchrun itself was stopped (state T, SIGSTOP): killed with its ranks"
    )
