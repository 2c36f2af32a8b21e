"""Ctrl-C to plain `pytest benches` exits 2 wherever it lands: while the plugin and torch import,
during the case, while pytest-benchmark writes and the summary prints, and while the process
leaves (Python resets its handlers then, and torch's teardown took seconds: exit -2). Ctrl-C to
`gpubench run` is its too wherever it lands: as a build starts, while its fork server is stopped,
as a build ends, after the last one, and while the report is written."""

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from runs import GPUBENCH, REPO, build_processes

from gpubench.harness.commands import run_command
from gpubench.harness.commands.cli import build_parser
from gpubench.harness.commands.common import read_options, report_after_run
from gpubench.harness.core.exits import StopSignal
from gpubench.harness.processes.build_runs import run_builds
from gpubench.harness.pytest_plugin.forked import ForkLauncher, ForkServer
from gpubench.harness.processes.launch import Completed, Job, ProcessLauncher, run_together
from gpubench.harness.processes.protocol import BuildAnswer, BuildPlan

STAGGER_S = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.3]


def torch_loaded(pid: int) -> bool:
    """torch's library is mapped: the plugin, which holds Ctrl-C from its import on, is loading.
    (Before pytest reads the conftest nothing of gpubench runs: Python's own Ctrl-C applies.)"""
    try:
        return "libtorch" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def leaving(pid: int) -> bool:
    """The process has called exit: a zombie, or the kernel still unmapping torch's memory
    (PF_EXITING, tens of ms) — its status is decided and no handler runs any more (a Ctrl-C then is
    not one to it)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return True
    # state; flags & PF_EXITING
    return fields[0] in ("Z", "X") or bool(int(fields[6]) & 0x4)


def interrupted_run(tmp_path: Path, delay_s: float) -> tuple[bool, int, str]:
    """(alive when Ctrl-C came, exit code, output) of one tiny run sent SIGINT `delay_s` after torch
    loads."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "benches",
            "--benchmark-only",
            "-p",
            "no:cacheprovider",
            "--profile=smoke",
            "--device=cpu",
            f"--results-dir={tmp_path}",
            "-k",
            "matmul and fp32",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while proc.poll() is None and not torch_loaded(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(delay_s)
    alive = proc.poll() is None and not leaving(proc.pid)
    if alive:
        # as a terminal's Ctrl-C: the whole foreground group
        os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    return alive, proc.returncode, out


@pytest.mark.process
def test_ctrl_c_at_any_moment_of_a_plain_pytest_run_exits_2(tmp_path):
    outcomes = [interrupted_run(tmp_path / str(i), delay_s) for i, delay_s in enumerate(STAGGER_S)]
    interrupted = [(code, out) for alive, code, out in outcomes if alive]
    assert len(interrupted) >= len(STAGGER_S) // 2, (
        "the runs ended before most Ctrl-Cs: stagger them earlier"
    )
    for code, out in interrupted:
        assert code == 2, out[-1500:]
        assert "Traceback" not in out, out[-1500:]
    # a run that ended first is whole
    assert all(code == 0 for alive, code, _ in outcomes if not alive)


# Ctrl-C to `gpubench run` while its build process starts: the interpreter, pytest, its plugins and
# torch import in the first ~0.3 s. Before gpubench.harness.processes.build_main held it from the
# first line, a KeyboardInterrupt traceback from an import (socket, argparse, the assertion
# rewriter) came at 0.02-0.15 s, one of them with exit 1.
BUILD_START_STAGGER_S = [0.0, 0.02, 0.06, 0.15, 0.3]
# A forked build reaches its pytest session within about 0.3 s, where a Ctrl-C is pytest's own
# interrupt report.
FORKED_START_STAGGER_S = [0.0, 0.02, 0.06]


def build_started(proc: subprocess.Popen[str]) -> bool:
    return bool(build_processes(proc.pid))


def interrupted_gpubench_run(tmp_path: Path, delay_s: float, *how: str) -> tuple[int, str]:
    """(exit code, output) of `gpubench run` given a terminal's Ctrl-C `delay_s` after its build
    process started."""
    proc = subprocess.Popen(
        [
            *GPUBENCH,
            "run",
            "--device",
            "cpu",
            "--profile",
            "smoke",
            "--no-report",
            f"--results-dir={tmp_path}",
            "--run-id=r",
            "-k",
            "matmul and fp32-n64",
            *how,
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # PLW1509: no threads
        preexec_fn=lambda: (
            signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
            os.setsid(),
        ),
    )
    deadline = time.monotonic() + 60
    while proc.poll() is None and not build_started(proc) and time.monotonic() < deadline:
        time.sleep(0.002)
    time.sleep(delay_s)
    # as a terminal's Ctrl-C: the whole foreground group
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out


@pytest.mark.process
@pytest.mark.parametrize(
    ("how", "delay_s"),
    [(("--no-fork",), delay_s) for delay_s in BUILD_START_STAGGER_S]
    + [((), delay_s) for delay_s in FORKED_START_STAGGER_S],
    ids=[f"fresh-interpreter-{d}s" for d in BUILD_START_STAGGER_S]
    + [f"forked-{d}s" for d in FORKED_START_STAGGER_S],
)
def test_ctrl_c_while_a_build_process_starts_is_one_line_and_exit_130(tmp_path, how, delay_s):
    code, out = interrupted_gpubench_run(tmp_path, delay_s, *how)
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out[-2000:]
    assert code == 130, out[-2000:]
    # made as the build's session starts: before it, the line names no file
    csv_path = tmp_path / "r.csv"
    assert out.strip().splitlines()[-1] == (
        f"gpubench: interrupted: 0 rows kept in {csv_path} (each whole); re-run with another "
        "--run-id for the rest"
        if csv_path.exists()
        else "gpubench: interrupted: no rows were written"
    ), out[-2000:]


@pytest.mark.process
def test_ctrl_c_while_the_fork_server_is_stopped_does_not_wait_for_its_answer():
    # the launcher waited out the server's 30 s answer limit, then started a fresh interpreter only
    # to interrupt it
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    # stands for a server stopped by kill -STOP
    server = subprocess.Popen(["sleep", "60"], start_new_session=True)
    server.send_signal(signal.SIGSTOP)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    started = time.monotonic()
    timer.start()
    try:
        done = ForkLauncher(server=ForkServer(server, ours)).run(
            Job([sys.executable, "-c", "pass"], plan=BuildPlan(0, [], []))
        )
    finally:
        timer.join()
        theirs.close()
        server.kill()
        server.wait()
    assert time.monotonic() - started < 5
    assert (done.signal, done.stalled) == (
        signal.SIGINT,
        "was not started: the fork server was stopped (state T) when SIGINT came: ended",
    )


@pytest.mark.process
def test_ctrl_c_as_a_build_ends_is_the_runs():
    # it was passed on to the build that had just ended, and lost: the run went on to its report,
    # exit 0
    done = run_together(
        [(ProcessLauncher(), Job([sys.executable, "-c", "pass"]))],
        ended=lambda index: os.kill(os.getpid(), signal.SIGINT),
    )
    assert done[0].signal == signal.SIGINT


def test_ctrl_c_after_the_last_build_stops_the_run():
    # noted between the last build and the loop's end, then forgotten: exit 0 and a report
    outcome = run_builds(
        ExitsWith([0], builds=1),
        lambda build, builds: Job(["build"]),
        (2, 3, 4),
        more=lambda build, answers: os.kill(os.getpid(), signal.SIGINT) or False,
    )
    assert (outcome.code, outcome.stopped) == (2, True)


@dataclass
class ExitsWith:
    """A launcher whose builds exit with the given codes, each answering that the selection needs
    `builds`."""

    codes: list[int]
    builds: int = 1
    started: int = 0

    def run(self, job: Job) -> Completed:
        self.started += 1
        return Completed(
            self.codes[self.started - 1],
            answer=BuildAnswer(self.started - 1, self.builds, exit_code=0),
        )


def run_args(tmp_path: Path, *more: str) -> argparse.Namespace:
    args, _ = build_parser().parse_known_args(
        ["run", "--device", "cpu", "--results-dir", str(tmp_path), "--run-id", "r", *more]
    )
    args.run = read_options(args)
    return args


def test_ctrl_c_between_the_builds_and_the_report_keeps_the_rows_and_says_how_to_report(
    tmp_path, monkeypatch, capsys
):
    # a KeyboardInterrupt traceback (-2, no exit record) while the fork server closed or the noise
    # line was read
    (tmp_path / "r.csv").write_text("case_id,status\nmatmul/n8,ok\n")
    monkeypatch.setattr(run_command, "run_builds", lambda args, extra: 0)

    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(run_command, "say_noise", interrupted)
    assert run_command.cmd_run(run_args(tmp_path), []) == 130
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"gpubench: interrupted: 1 rows kept in {tmp_path / 'r.csv'} (each whole); the report was "
        f"not written — gpubench report {tmp_path / 'r.csv'} makes it later"
    )


@pytest.mark.parametrize(
    ("stop", "code"), [(KeyboardInterrupt(), 130), (StopSignal(signal.SIGTERM), 143)]
)
def test_a_stop_while_the_report_is_written_exits_as_interrupted_with_the_rows_kept(
    tmp_path, monkeypatch, capsys, stop, code
):
    csv_path = tmp_path / "r.csv"
    csv_path.write_text("case_id,status\nmatmul/n8,ok\n")

    def stopped(*args: object, **kwargs: object) -> None:
        raise stop

    monkeypatch.setattr("gpubench.reports.render.build.build_report", stopped)
    assert report_after_run([csv_path], tmp_path / "out", 0) == code
    assert capsys.readouterr().err.splitlines() == [
        f"gpubench: interrupted while writing the report: 1 rows kept in {csv_path} (each whole); "
        f"the report was not written — gpubench report {csv_path} --out {tmp_path / 'out'} makes "
        "it later"
    ]


def test_a_stop_line_names_no_file_the_run_did_not_write(tmp_path, monkeypatch, capsys):
    # "0 rows kept in r.csv" for a run stopped before its build made r.csv
    monkeypatch.setattr(run_command, "run_builds", lambda args, extra: 130)
    assert run_command.cmd_run(run_args(tmp_path, "--no-report"), []) == 130
    assert capsys.readouterr().err.splitlines()[-1] == "gpubench: interrupted: no rows were written"
