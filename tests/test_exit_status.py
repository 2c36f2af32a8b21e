"""The exit status is pytest's: a run under gpubench's plugin leaves with what the same run leaves
with without it (gpubench may make a status graver, never a failure a success), and a signal the
parent ignored stays ignored."""

from __future__ import annotations

import signal

import pytest
from runs import GPUBENCH, PLUGIN_OVER_TINY, run_bench_process

pytest_plugins = ["pytester"]

# A third-party plugin (loaded with -p raiser) whose terminal summary raises, after every test
# passed.
RAISER = """
def pytest_terminal_summary(terminalreporter):
    raise RuntimeError("raiser: its summary broke")
"""


# the exit status is the process's: the suite's plugin leaves through exit_process
@pytest.mark.process
def test_a_plugin_whose_terminal_summary_raises_exits_as_without_gpubench(one_case):
    """Plain pytest dies of the exception, traceback and exit 1; under the suite's plugin the
    process left with the session's status, 0, as if nothing had failed."""
    one_case.makepyfile(raiser=RAISER, test_plain="def test_plain():\n    pass\n")
    plain = one_case.runpytest_subprocess(
        "-p", "raiser", "-p", "no:gpubench", "-p", "no:cacheprovider", "test_plain.py"
    )
    assert plain.ret == 1 and "raiser: its summary broke" in plain.stderr.str()
    suite = run_bench_process(one_case, "-p", "raiser")
    assert suite.ret == plain.ret, suite.stdout.str()[-2000:] + suite.stderr.str()[-2000:]
    assert "RuntimeError: raiser: its summary broke" in suite.stderr.str()


class HangupSeen:
    """What SIGTERM's and SIGHUP's handlers are while a case runs."""

    def __init__(self) -> None:
        self.handlers: list[tuple[object, object]] = []

    def pytest_runtest_call(self, item: pytest.Item) -> None:
        self.handlers.append((signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP)))


def test_a_hangup_ignored_by_nohup_stays_ignored_through_the_run(one_case):
    """`nohup gpubench run` starts the build with SIGHUP ignored: the terminal's close must not end
    it. The plugin put its own stop handler over SIG_IGN, so the closed terminal ended the run nohup
    was asked to keep."""
    seen = HangupSeen()
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        result = one_case.runpytest_inprocess(*PLUGIN_OVER_TINY, plugins=[seen])
        after = signal.getsignal(signal.SIGHUP)
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert result.ret == 0, result.stdout.str()[-2000:]
    [(on_term, on_hangup)] = seen.handlers
    assert on_hangup is signal.SIG_IGN and after is signal.SIG_IGN
    # SIGTERM, not ignored, still unwinds the case
    assert callable(on_term) and on_term is not signal.SIG_DFL


# a build of gpubench run: pytest is the process's command
@pytest.mark.process
def test_an_option_a_build_refuses_is_one_line_and_exit_4_under_gpubench_run(tmp_path):
    """A refusal at the build's set-up (pytest's UsageError) is pytest's own one line and exit 4,
    not an uncaught exception's traceback and exit 1."""
    from runs import gpubench_run

    proc = gpubench_run(tmp_path, "--threads", "0", "-k", "matmul and n64")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 4, out[-2000:] + err[-2000:]
    assert "--threads 0: use 1 to" in out + err and "Traceback" not in out + err


# pytest's -W error in a build of gpubench run
@pytest.mark.process
def test_warnings_as_errors_leave_the_builds_running(tmp_path):
    """A build imports gpubench before pytest starts: pytest's warning that it cannot rewrite the
    package became an error under -W error and ended every build before its first case (exit 3)."""
    from runs import gpubench_run

    proc = gpubench_run(tmp_path, "-W", "error", "-k", "matmul and fp32 and n64", "--no-report")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0 and "1 case(s) measured" in out, out[-2000:] + err[-2000:]


@pytest.mark.process
def test_benchmark_skip_under_gpubench_run_is_refused_in_one_line(tmp_path):
    """Every case a run's build collects is a timed one: --benchmark-skip ran nothing and exited 0,
    in silence."""
    from runs import gpubench_run

    proc = gpubench_run(
        tmp_path, "--benchmark-skip", "-k", "matmul and fp32 and n64", "--no-report"
    )
    out, err = proc.communicate(timeout=300)
    assert (
        proc.returncode == 4 and "--benchmark-skip skips every case gpubench run times" in out + err
    ), out + err


@pytest.mark.process
def test_a_torch_py_in_the_working_folder_is_not_the_builds_torch(tmp_path):
    """`python -m` puts the working folder first on a build's import path: a user's torch.py (or
    pytest.py) there was imported instead of the real one, and every build died."""
    import subprocess

    from runs import REPO

    (tmp_path / "torch.py").write_text('raise SystemExit("the working folder\'s torch.py")\n')
    done = subprocess.run(
        [
            *GPUBENCH,
            "run",
            "--device",
            "cpu",
            "--profile",
            "smoke",
            "-k",
            "matmul and fp32 and n64",
            "--results-dir",
            str(tmp_path / "res"),
            "--no-report",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**__import__("os").environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0 and "1 case(s) measured" in done.stdout, (
        done.stdout[-2000:] + done.stderr[-2000:]
    )


@pytest.mark.process
def test_a_refusal_keeps_its_exit_code_when_stderr_cannot_be_written(tmp_path):
    """stderr on a full device: the refusal's one line cannot be written, and its failed write
    turned exit 4 (or 2) into a traceback's 1."""
    import subprocess
    import sys

    from runs import REPO

    with open("/dev/full", "w") as full:
        for argv, code in [
            (["run", "--threads", "0", "-k", "matmul and n64", "--results-dir", str(tmp_path)], 4),
            (["report", str(tmp_path / "nothing"), "--out", str(tmp_path / "out")], 2),
        ]:
            done = subprocess.run(
                [sys.executable, "-m", "gpubench.harness.commands.cli", *argv],
                stdout=subprocess.PIPE,
                stderr=full,
                timeout=300,
                cwd=REPO,
            )
            assert done.returncode == code, argv


@pytest.mark.parametrize(
    "folder, said",
    [("x" * 300, "File name too long — pass a shorter folder"), ("", "--results-dir is empty")],
    ids=["too-long", "empty"],
)
def test_a_results_folder_no_file_system_can_name_is_one_line_before_any_build(
    tmp_path, capsys, folder, said
):
    from gpubench.harness.commands.cli import main

    path = str(tmp_path / folder) if folder else ""
    assert main(["run", "-k", "matmul", "--results-dir", path]) == 4
    assert said in capsys.readouterr().err


def test_a_node_id_given_to_gpubench_run_is_one_line_naming_the_k_to_use(capsys):
    """A node id was collected beside the suite, and the run timed all 93 smoke cases in silence."""
    from gpubench.harness.commands.cli import main

    assert main(["run", "benches/bench_matmul.py::test_matmul[fp32-n64]"]) == 4
    assert "use -k 'fp32-n64'" in capsys.readouterr().err
    from gpubench.harness.commands.run_checks import check_pytest_args

    # a warning filter is no node id
    check_pytest_args(["-W", "error::UserWarning"])


def test_a_results_file_removed_during_the_run_is_said_not_passed_over(tmp_path, capsys):
    """The run's file removed under it (its folder moved, an rm): the run said nothing and exited
    0."""
    import argparse

    from gpubench.harness.commands.run_command import after_builds
    from gpubench.harness.processes.cpu_readings import CpuWatch

    args = argparse.Namespace(rows_written=3, no_report=True)
    assert after_builds(args, 0, tmp_path / "gone.csv", CpuWatch()) == 1
    assert (
        "the builds wrote 3 rows to " in (said := capsys.readouterr().err)
        and "gone.csv, which is gone" in said
    )
    # removed, then made anew by a later build: fewer rows than written
    from gpubench.harness.records.results import ResultsWriter
    from gpubench.harness.records.schema import SCHEMA_VERSION

    writer = ResultsWriter(tmp_path, "again")
    writer.append(
        {
            "schema_version": SCHEMA_VERSION,
            "run_id": "again",
            "timestamp_utc": "2026-11-02T10:00:00+00:00",
            "machine_id": "m",
            "hostname": "h",
            "device": "cpu",
            "device_name": "x",
            "torch_version": "2",
            "cuda_version": "",
            "workload": "matmul",
            "case_id": "matmul/fp32-n64",
            "status": "ok",
            "reason": "",
            "build": 2,
            "builds": 3,
        }
    )
    writer.close()
    assert after_builds(args, 0, tmp_path / "again.csv", CpuWatch()) == 1
    assert "again.csv, which holds 1 of them" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, said",
    [
        (["-n", "2"], "-n: pytest-xdist would time cases side by side"),
        (["--lf"], "--lf: a run's builds keep no pytest cache"),
        (["-c", "/dev/null"], "-c: the suite's configuration is gpubench's"),
        (
            ["-p", "no:benchmark"],
            "-p no:benchmark: gpubench run times every case through pytest-benchmark",
        ),
    ],
)
def test_pytest_options_a_runs_builds_cannot_honour_are_one_line_before_any_build(
    capsys, args, said
):
    """Each read as something else before: -n as pytest-benchmark's --benchmark-disable line, --lf
    as a usage block, -c /dev/null as 'the -k given matches no case', -p no:benchmark as an unknown
    --benchmark-quiet."""
    from gpubench.harness.commands.cli import main

    assert main(["run", "-k", "matmul", *args]) == 4
    assert said in capsys.readouterr().err


def test_an_unreadable_pytest_addopts_is_one_line(monkeypatch, capsys):
    from gpubench.harness.commands.cli import main

    monkeypatch.setenv("PYTEST_ADDOPTS", "-k 'unclosed")
    assert main(["run", "-k", "matmul"]) == 4
    assert (
        "PYTEST_ADDOPTS cannot be read (No closing quotation) — fix its quotes"
        in capsys.readouterr().err
    )


@pytest.mark.process
def test_a_run_with_plugin_autoload_off_measures_and_leaves_nothing_in_the_working_folder(tmp_path):
    """PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 (a CI's setting) refused every run ('unrecognized arguments:
    --benchmark-quiet'); and every run left an empty .benchmarks/ where it was started."""
    import os
    import subprocess

    from runs import REPO

    where = tmp_path / "here"
    where.mkdir()
    done = subprocess.run(
        [
            *GPUBENCH,
            "run",
            "--device",
            "cpu",
            "--profile",
            "smoke",
            "-k",
            "matmul and fp32 and n64",
            "--results-dir",
            str(tmp_path / "res"),
            "--no-report",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=where,
        env={**os.environ, "PYTHONPATH": str(REPO), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    assert done.returncode == 0 and "1 case(s) measured" in done.stdout, (
        done.stdout[-2000:] + done.stderr[-2000:]
    )
    assert list(where.iterdir()) == []
