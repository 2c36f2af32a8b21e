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

from harness.commands.cli import build_parser, main
from harness.commands.fleet import FleetError, parse_target, run_failure
from harness.commands.fleet_command import check_args
from harness.processes.launch import Job, ProcessLauncher


@pytest.mark.parametrize("text", ["cpus=²", "cpus=٣", "time=1²", "time=٣٠", "time=1:٣٠:00"])
def test_numbers_in_other_digits_are_refused_in_one_line(text):
    # str.isdigit takes them: '²' then raised int()'s ValueError as a traceback, '٣٠' became 30 minutes unsaid
    with pytest.raises(FleetError, match="whole number|give minutes"):
        parse_target(text, 1)


def test_a_target_with_other_digits_is_one_line_and_exit_2_from_the_command(tmp_path, capsys):
    assert main(["fleet", "--store", str(tmp_path / "S"), "--target", "cpus=²"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cpus=² is not a whole number" in err
    assert not (tmp_path / "S").exists()


@pytest.mark.parametrize("value", ["a\x07", "gpu\nb", "a\tb", "a\x7f", "a\u202eb", "a\u200bb"])
def test_a_control_character_in_a_target_value_is_refused_naming_it(value):
    # it reached the sbatch script, where sbatch refused it without naming it (or a name looked like another)
    with pytest.raises(FleetError) as refused:
        parse_target(f"partition={value}", 1)
    line = str(refused.value)
    assert f"partition={value!r}" in line and "control character" in line and "\n" not in line


def test_an_empty_store_is_refused_as_gpubench_run_refuses_it(tmp_path, monkeypatch):
    # an unset shell variable ($STORE): the fleet used the current folder as its store, unsaid
    monkeypatch.chdir(tmp_path)
    args, extra = build_parser().parse_known_args(["fleet", "--store", ""])
    with pytest.raises(FleetError, match="--store is empty — pass the store's folder"):
        check_args(args, extra)
    assert list(tmp_path.iterdir()) == []


USAGE = "usage: gpubench run [-h] ...\ngpubench run: error: argument --no-report: ignored explicit argument 'x'\n"
INTERRUPTED = "gpubench: interrupted: 2 rows kept in S/m/r.csv (each whole); re-run with another --run-id\n"
EXIT_2 = "subprocess.CalledProcessError: Command '[...]' returned non-zero exit status 2."


def test_exit_2_of_a_job_is_named_from_the_runs_own_last_line():
    # gpubench run's interruptions exit 130/129/143: its 2 is a usage error, not "interrupted"
    assert run_failure(EXIT_2, USAGE) == \
        "gpubench run exited 2 (usage error: argument --no-report: ignored explicit argument 'x')"
    assert run_failure(EXIT_2, "gpubench: error: benches/ not found beside the harness\n") == \
        "gpubench run exited 2 (benches/ not found beside the harness)"
    assert run_failure(EXIT_2, "") == "gpubench run exited 2"
    assert run_failure(EXIT_2.replace("status 2", "status 130"), INTERRUPTED) == "gpubench run exited 130 (interrupted)"


@pytest.mark.process
def test_what_a_build_leaves_in_its_process_group_is_killed_when_it_ends(tmp_path):
    # a build process (tiny python) that starts a sleep in its own group and exits, as a side's shell
    # wrapper with a background job does: the sleep outlived the session
    pid_file = tmp_path / "pid"
    script = f"import subprocess; p = subprocess.Popen(['sleep', '30']); open({str(pid_file)!r}, 'w').write(str(p.pid))"
    assert ProcessLauncher().run(Job([sys.executable, "-c", script])).code == 0
    left = psutil.Process(int(pid_file.read_text()))
    deadline = time.monotonic() + 5
    while left.is_running() and left.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left.is_running() or left.status() == psutil.STATUS_ZOMBIE


@pytest.mark.process
def test_a_process_token_tells_the_same_process_from_an_ended_one():
    # a `sleep` stands for the fleet; killed and not yet reaped (a zombie) it has ended too
    from harness.processes.lifetime import process_token, token_alive

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
    assert not token_alive(f"{os.getpid()}:1.000")  # a live pid, given to a later process than the one named


@pytest.mark.process
def test_a_build_stops_as_on_sigterm_once_the_process_it_runs_for_has_ended(capfd):
    # the build (tiny python) kills the `sleep` that stands for a local fleet (kill -9), then waits for SIGTERM
    from harness.processes.lifetime import process_token

    fleet = subprocess.Popen(["sleep", "30"])
    script = f"import os, time\nos.kill({fleet.pid}, 9)\ntime.sleep(30)"
    started = time.monotonic()
    try:
        done = ProcessLauncher(stop_with=process_token(fleet.pid)).run(Job([sys.executable, "-c", script]))
    finally:
        fleet.kill()
        fleet.wait()
    assert done.signal == signal.SIGTERM and done.code == -signal.SIGTERM and time.monotonic() - started < 10
    assert f"the fleet that started this run (pid {fleet.pid}) has ended: stopping as on SIGTERM" in capfd.readouterr().err
