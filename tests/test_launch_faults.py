"""The launchers against what the campaign of shared stores and hostile input found: --target
values no scheduler should see, an empty --store, exit 2 of a job, what a build leaves behind in
its process group, and a run whose local fleet is gone. Processes started here are tiny python or
sleep children, each named with its reason."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from gpubench.harness.commands.cli import build_parser, main
from gpubench.harness.commands.fleet import exited, reason_from_log
from gpubench.harness.commands.fleet import parse_target
from gpubench.harness.core.exits import UsageError
from gpubench.harness.commands.fleet_command import check_args
from gpubench.harness.processes.launch import Job, ProcessLauncher


@pytest.mark.parametrize("text", ["cpus=²", "cpus=٣", "time=1²", "time=٣٠", "time=1:٣٠:00"])
def test_numbers_in_other_digits_are_refused_in_one_line(text):
    # str.isdigit takes them: '²' then raised int()'s ValueError as a traceback, '٣٠' became 30
    # minutes unsaid
    with pytest.raises(UsageError, match="whole number|give minutes"):
        parse_target(text, 1)


def test_a_target_with_other_digits_is_one_line_and_exit_2_from_the_command(tmp_path, capsys):
    assert main(["fleet", "--store", str(tmp_path / "S"), "--target", "cpus=²"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cpus=² is not a whole number" in err
    assert not (tmp_path / "S").exists()


@pytest.mark.parametrize("value", ["a\x07", "gpu\nb", "a\tb", "a\x7f", "a\u202eb", "a\u200bb"])
def test_a_control_character_in_a_target_value_is_refused_naming_it(value):
    # it reached the sbatch script, where sbatch refused it without naming it (or a name looked like
    # another)
    with pytest.raises(UsageError) as refused:
        parse_target(f"partition={value}", 1)
    line = str(refused.value)
    assert f"partition={value!r}" in line and "control character" in line and "\n" not in line


def test_an_empty_store_is_refused_as_gpubench_run_refuses_it(tmp_path, monkeypatch):
    # an unset shell variable ($STORE): the fleet used the current folder as its store, unsaid
    monkeypatch.chdir(tmp_path)
    args, extra = build_parser().parse_known_args(["fleet", "--store", ""])
    with pytest.raises(UsageError, match="--store is empty — pass the store's folder"):
        check_args(args, extra)
    assert list(tmp_path.iterdir()) == []


USAGE = (
    "usage: gpubench run [-h] ...\ngpubench run: error: argument --no-report: ignored explicit "
    "argument 'x'\n"
)
INTERRUPTED = (
    "gpubench: interrupted: 2 rows kept in S/m/r.csv (each whole); re-run with another --run-id\n"
)
EXIT_2 = "subprocess.CalledProcessError: Command '[...]' returned non-zero exit status 2."


def test_exit_2_of_a_job_is_named_from_the_runs_own_last_line():
    # gpubench run's interruptions exit 130/129/143: its 2 is a usage error, not "interrupted"
    assert exited(2, USAGE) == (
        "gpubench run exited 2 (usage error: argument --no-report: ignored explicit argument 'x')"
    )
    assert (
        exited(2, "gpubench: error: benches/ not found beside the harness\n")
        == "gpubench run exited 2 (benches/ not found beside the harness)"
    )
    assert exited(2, "") == "gpubench run exited 2"
    assert exited(130, INTERRUPTED) == "gpubench run exited 130 (interrupted)"
    # no exit record (refused before it had a folder): the status submitit's trace in the log names
    assert reason_from_log(USAGE + EXIT_2) == exited(2, USAGE)


@pytest.mark.process
def test_what_a_build_leaves_in_its_process_group_is_killed_when_it_ends(tmp_path):
    # a build process (tiny python) that starts a sleep in its own group and exits, as a side's
    # shell wrapper with a background job does: the sleep outlived the session
    pid_file = tmp_path / "pid"
    script = (
        f"import subprocess; p = subprocess.Popen(['sleep', '30']); open({str(pid_file)!r}, "
        "'w').write(str(p.pid))"
    )
    assert ProcessLauncher().run(Job([sys.executable, "-c", script])).code == 0
    try:
        left = psutil.Process(int(pid_file.read_text()))
    # killed and already reaped (by init, or by a subreaper)
    except psutil.NoSuchProcess:
        return
    deadline = time.monotonic() + 5
    while (
        left.is_running() and left.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    assert not left.is_running() or left.status() == psutil.STATUS_ZOMBIE


@pytest.mark.process
def test_a_process_token_tells_the_same_process_from_an_ended_one():
    # a `sleep` stands for the fleet; killed and not yet reaped (a zombie) it has ended too
    from gpubench.harness.processes.lifetime import process_token, token_alive

    fleet = subprocess.Popen(["sleep", "30"])
    try:
        token = process_token(fleet.pid)
        assert token_alive(token)
        fleet.kill()
        deadline = time.monotonic() + 5
        while token_alive(token) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not token_alive(token)
    finally:
        fleet.kill()
        fleet.wait()
    # a live pid, given to a later process than the one named
    assert not token_alive(f"{os.getpid()}:1.000")


@pytest.mark.process
def test_a_build_stops_as_on_sigterm_once_the_process_it_runs_for_has_ended(capfd):
    # the build (tiny python) kills the `sleep` that stands for a local fleet (kill -9), then waits
    # for SIGTERM
    from gpubench.harness.processes.lifetime import process_token

    fleet = subprocess.Popen(["sleep", "30"])
    script = f"import os, time\nos.kill({fleet.pid}, 9)\ntime.sleep(30)"
    started = time.monotonic()
    try:
        done = ProcessLauncher(stop_with=process_token(fleet.pid)).run(
            Job([sys.executable, "-c", script])
        )
    finally:
        fleet.kill()
        fleet.wait()
    assert (
        done.signal == signal.SIGTERM
        and done.code == -signal.SIGTERM
        and time.monotonic() - started < 10
    )
    assert (
        f"the fleet that started this run (pid {fleet.pid}) has ended: stopping as on SIGTERM"
        in capfd.readouterr().err
    )


@pytest.mark.parametrize(
    "text", ["partition=gрu", "gres=gpu:٣", "constraint=ａ100", "device=cuda:０"]
)
def test_a_target_value_outside_ascii_is_refused_naming_the_character(text):
    # a Cyrillic р reached sbatch, whose "invalid partition specified: gрu" reads as gpu
    with pytest.raises(UsageError, match=r"holds '.' \(U\+[0-9A-F]{4}\), which is not ASCII"):
        parse_target(text, 1)
    # a name becomes a file-safe one, as before
    assert parse_target("name=ёлка,partition=gpu", 1).name == "____"


def test_a_very_long_target_is_refused_by_its_start():
    # 120,000 characters of device= went to the job, whose refusal printed them twice (240 KB)
    with pytest.raises(UsageError) as refused:
        parse_target("device=cuda:" + "a" * 200_000, 1)
    assert "is 200012 characters long: no target needs more than 1024" in str(refused.value)
    assert len(str(refused.value)) < 200


def test_an_empty_jobs_dir_is_refused_as_an_empty_store(tmp_path, monkeypatch, capsys):
    # an unset shell variable: the job files (the command and environment of each job) went into the
    # current folder
    monkeypatch.chdir(tmp_path)
    # what a job would run, were one started
    nothing = ["--profile", "smoke", "--device", "cpu", "-k", "no_such_case"]
    assert (
        main(
            [
                "fleet",
                "--store",
                str(tmp_path / "S"),
                "--jobs-dir",
                "",
                "--target",
                "name=x",
                *nothing,
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--jobs-dir is empty — pass a folder only you can write" in err
    assert list(tmp_path.iterdir()) == []


def test_a_malformed_stop_with_token_is_refused_before_any_build(tmp_path, monkeypatch, capsys):
    # read as a process that had ended, it stopped the run at once: "the fleet ... (pid abc) has
    # ended"
    monkeypatch.setenv("GPUBENCH_STOP_WITH", "abc")
    assert (
        main(["run", "--device", "cpu", "--results-dir", str(tmp_path / "r"), "-k", "nothing"]) == 4
    )
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1
        and "GPUBENCH_STOP_WITH='abc' is not <pid>:<start time>" in err
        and "unset it" in err
    )
    from gpubench.harness.processes.lifetime import check_stop_token

    check_stop_token("4242:1764600000.125")


LEAVES_DAEMON = """import os, subprocess, sys
fd = int(next(arg for arg in sys.argv if arg.startswith('--answer-fd=')).split('=')[1])
daemon = subprocess.Popen(['sleep', '30'], pass_fds=(fd,), start_new_session=True)
open(sys.argv[1], 'w').write(str(daemon.pid))
# a finished build's answer names its exit
os.write(fd, b'{"build": 0, "builds": 1, "exit_code": 0}\\n')
"""


@pytest.mark.process
def test_a_daemon_holding_the_answer_pipe_does_not_hold_up_the_run(tmp_path):
    # the build (tiny python) answers, then leaves a `sleep` in a session of its own that holds the
    # answer pipe's write end: the run must not wait for the pipe's end as long as the sleep lives
    from gpubench.harness.processes.build_runs import run_builds
    from gpubench.harness.processes.protocol import BuildPlan

    pid_file = tmp_path / "pid"
    started = time.monotonic()
    try:
        argv = [sys.executable, "-c", LEAVES_DAEMON, str(pid_file)]
        outcome = run_builds(
            ProcessLauncher(), lambda build, builds: Job(argv, plan=BuildPlan(build, [], [])), ()
        )
    finally:
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
    assert outcome.code == 0 and outcome.builds == 1 and time.monotonic() - started < 15


ADOPTING = """import subprocess, sys
from gpubench.harness.processes.launch import Job, ProcessLauncher
from gpubench.harness.processes.lifetime import adopt_orphans
adopt_orphans()
ProcessLauncher().run(Job([sys.executable, '-c', sys.argv[1]]))
"""
DAEMONIZES = """import os, subprocess
quiet = {'stdout': subprocess.DEVNULL, 'stderr': subprocess.DEVNULL}
daemon = subprocess.Popen(['sleep', '30'], start_new_session=True, **quiet)
open(os.environ['PID_FILE'], 'w').write(str(daemon.pid))
"""


@pytest.mark.process
def test_what_a_build_leaves_in_a_session_of_its_own_is_killed_when_it_ends(tmp_path):
    # a python standing for `gpubench run` (subreaper: process-wide) runs a build that starts a
    # `sleep` with setsid and exits: the sleep outlived the run, as a spinning daemon would load
    # later builds
    pid_file = tmp_path / "pid"
    done = subprocess.run(
        [sys.executable, "-c", ADOPTING, DAEMONIZES],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PID_FILE=str(pid_file)),
        check=False,
    )
    pid = int(pid_file.read_text())
    alive = psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    if alive:
        os.kill(pid, signal.SIGKILL)
    assert not alive and done.returncode == 0, done.stderr
    assert f"gpubench: killed what the build process left running: sleep (pid {pid})" in done.stderr


@pytest.mark.process
def test_a_python_that_answers_then_hangs_is_named_so(tmp_path):
    # a shell script stands for a side's wrapper that runs python, then waits: "did not start
    # Python" was false
    from gpubench.harness.commands.ab import starts_python

    wrapper = tmp_path / "python"
    wrapper.write_text("#!/bin/sh\necho 'gpubench-probe 3'\nsleep 30\n")
    wrapper.chmod(0o755)
    with pytest.raises(
        ValueError,
        match=r"answered as Python 3 but did not exit within 1 s \(what does it run after",
    ):
        starts_python(str(wrapper), "--a-python", deadline_s=1.0)


def test_a_link_at_the_sessions_marker_is_named_as_the_marker(tmp_path):
    # it was called "results directory", with the fix "pass --results-dir with the folder itself"
    from gpubench.harness.commands.ab import write_marker
    from gpubench.harness.records.safe_files import RefusedPath

    (tmp_path / "s.ab.json").symlink_to(tmp_path / "elsewhere")
    marker = r"^the session's marker .*s\.ab\.json is a symbolic link .* pass another --run-id$"
    with pytest.raises(RefusedPath, match=marker):
        write_marker(tmp_path, "s", (), 3)
    assert not (tmp_path / "elsewhere").exists()
