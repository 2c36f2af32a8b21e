"""The gpubench command line: run, report, env, compare's exit codes, and its one-line errors."""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from runs import FULL_AFTER_ONE_ROW, GPUBENCH, REPO, assert_one_full_line, gpubench_run

from gpubench.harness.pytest_plugin import plugin
from gpubench.harness.commands.common import (
    SUITE_ROOT,
    no_cases_line,
    report_after_run,
    rootdir_for,
)
from gpubench.harness.commands.cli import build_parser, main
from gpubench.harness.commands.common import read_options
from gpubench.harness.commands.fleet import Target
from gpubench.harness.commands.fleet_command import run_argv
from gpubench.harness.commands.run_command import build_plan
from gpubench.harness.processes.protocol import BuildPlan
from gpubench.harness.devices.device import resolve_device
from gpubench.harness.core.options import RUN_OPTIONS
from gpubench.harness.records.results_reader import read_rows
from gpubench.reports.render import build


# what an import pulls in shows only in a fresh interpreter
@pytest.mark.process
def test_the_command_line_starts_without_the_statistics_stack():
    """pandas and scipy take about a second to import here: every gpubench start would pay it,
    though only `ab`, `report` and `compare` use them (they import them when they run)."""
    code = (
        "import sys; from gpubench.harness.commands.cli import build_parser; build_parser(); "
        "print(sorted(name for name in ('pandas', 'scipy', 'torch') if name in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout


def test_env_prints_the_fingerprint(capsys):
    assert main(["env", "--json"]) == 0
    fields = json.loads(capsys.readouterr().out)
    assert fields["device"] == str(resolve_device("auto"))
    assert len(fields["machine_id"]) == 12
    assert (
        fields["energy_source"] in ("rapl", "nvml")
        or "energy columns stay empty" in fields["energy_source"]
    )


def test_env_with_a_missing_device_is_one_line(capsys):
    code = main(["env", "--device", "warp-drive"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "unknown device" in err


def test_run_passes_unknown_options_through_to_pytest_and_its_own_in_the_plan_as_read_once(
    tmp_path,
):
    args, extra = build_parser().parse_known_args(
        ["run", "--device", "CPU", "--budget", "2m", "-k", "matmul", "--benchmark-json", "x.json"]
    )
    args.run = read_options(args)
    plan = BuildPlan.from_json(build_plan(args, extra, tmp_path, 1, 3, deadline_s=12.5).to_json())
    # the user's, untouched
    assert plan.pytest_args == ["-k", "matmul", "--benchmark-json", "x.json"]
    # no option travels as pytest's
    assert not [arg for arg in plan.suite_args if arg.startswith("--gpubench")]
    assert (plan.run.device, plan.run.run_budget_s, plan.deadline_s, plan.build, plan.builds) == (
        "cpu",
        120.0,
        12.5,
        1,
        3,
    )


def test_a_fleet_job_gets_the_options_the_fleet_read_as_they_are():
    args, _ = build_parser().parse_known_args(
        ["fleet", "--store", "S", "--budget", "90s", "--threads", "2"]
    )
    args.run = read_options(args)
    job, extra = build_parser().parse_known_args(
        run_argv(args, Path("/abs/S"), "F-x", Target("x"), [])[3:]
    )
    assert read_options(job) == replace(args.run, store="/abs/S", run_id="F-x") and not extra
    # no flag of its own: the fleet's value, never read again
    assert job.budget is None and job.threads is None


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpubench.harness.commands.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.process
def test_run_writes_results_and_a_report(tmp_path):
    done = run_cli(
        "run",
        "--profile",
        "smoke",
        "--results-dir",
        str(tmp_path),
        "--run-id",
        "mine",
        "-k",
        "matmul and fp32",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    csvs = list(tmp_path.glob("*.csv"))
    # --run-id names the file, and the report still follows
    assert [c.name for c in csvs] == ["mine.csv"]
    report = tmp_path / f"{csvs[0].stem}-report" / "report.md"
    assert report.exists() and "## Matmul" in report.read_text()


@pytest.mark.process
def test_run_with_a_bad_device_stops_before_any_case(tmp_path):
    done = run_cli("run", "--device", "cuda:9", "--results-dir", str(tmp_path / "r"), cwd=tmp_path)
    assert done.returncode == 4
    assert "ERROR:" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "r").exists()


def test_report_needs_rows(tmp_path, capsys):
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "no CSV files" in capsys.readouterr().err


class Recording:
    """A stand-in pytest parser that records the options a plugin adds."""

    def __init__(self):
        self.added = {}

    def getgroup(self, name):
        return self

    def addoption(self, *names, **kwargs):
        for name in names:
            self.added[name] = kwargs


def test_plugin_and_cli_share_one_option_table():
    class NoOtherPlugins:
        def get_plugins(self):
            return []

    recorded = Recording()
    plugin.pytest_addoption(recorded, NoOtherPlugins())
    run = build_parser().parse_args(["run"])
    for option in RUN_OPTIONS:
        assert recorded.added[option.flag]["default"] == getattr(run, option.dest), option.flag
        # no clash with another plugin's dest
        assert recorded.added[option.flag]["dest"] == "gpubench_" + option.dest
        assert recorded.added[option.flag]["help"] == option.help
        # --gpubench-profile and --profile
        assert recorded.added[option.namespaced] is recorded.added[option.flag]
    # a plain pytest run of one build of each case (gpubench run's builds get theirs in their plan)
    internal = {"--gpubench-build"}
    assert set(recorded.added) - internal == {o.flag for o in RUN_OPTIONS} | {
        o.namespaced for o in RUN_OPTIONS
    }


def test_a_plugin_that_owns_a_short_flag_keeps_it():
    class Profiling:
        def get_plugins(self):
            # declares --profile, as pytest-profiling does
            class PytestProfiling:
                @staticmethod
                def pytest_addoption(parser):
                    parser.getgroup("profiling").addoption("--profile", action="store_true")

            return [PytestProfiling]

    recorded = Recording()
    plugin.pytest_addoption(recorded, Profiling())
    assert (
        "--gpubench-profile" in recorded.added
        and "--profile" not in recorded.added
        and "--device" in recorded.added
    )


# ---- one line for what stops a run or a report ------------------------------------------------


@pytest.mark.process
def test_a_bad_benchmark_timer_and_an_empty_selection_are_one_line(tmp_path):
    bad = subprocess.run(
        [
            *GPUBENCH,
            "run",
            "--device",
            "cpu",
            "--profile",
            "smoke",
            "-k",
            "matmul",
            "--results-dir",
            str(tmp_path),
            "--benchmark-timer",
            "nosuch.timer",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        bad.returncode == 4 and "Traceback" not in bad.stderr and "cannot be loaded" in bad.stderr
    )
    empty = subprocess.run(
        [
            *GPUBENCH,
            "run",
            "--device",
            "cpu",
            "--profile",
            "smoke",
            "-k",
            "nosuchcase",
            "--results-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert empty.returncode == 5 and "no case matched the selection" in empty.stderr


@pytest.mark.process
def test_gpubench_run_refuses_an_empty_run_id_like_pytest(tmp_path):
    proc = gpubench_run(tmp_path, "-k", "matmul", "--run-id", "")
    out, err = proc.communicate(timeout=120)
    errors = [line for line in err.splitlines() if line.strip()]
    assert proc.returncode == 4 and len(errors) == 1 and "--run-id is 0 characters" in errors[0], (
        err
    )
    assert not (tmp_path / "res").exists()


@pytest.mark.process
def test_a_full_results_folder_is_one_line_under_gpubench_run(tmp_path):
    (tmp_path / "fullafter1.py").write_text(FULL_AFTER_ONE_ROW)
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])),
    )
    proc = gpubench_run(tmp_path, "-k", "matmul", "--run-id", "full", "-p", "fullafter1", env=env)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 75, err[-2000:]
    assert_one_full_line(out, err)
    assert (
        len(read_rows(tmp_path / "res" / "full.csv")) == 1
        and not (tmp_path / "res" / "full-report").exists()
    )


def test_a_report_without_out_goes_beside_its_results_and_is_never_read_back_as_a_run(
    tmp_path, capsys
):
    golden = Path(__file__).parent / "data" / "golden_laptop.csv"
    results = tmp_path / "results"
    results.mkdir()
    shutil.copy(golden, results / "laptop.csv")
    assert main(["report", str(results)]) == 0
    assert (results / "report" / "report.md").exists() and "report -> " in capsys.readouterr().out
    # again: its own merged.csv is no second run of the machine
    assert main(["report", str(results)]) == 0
    assert main(["report", str(results / "laptop.csv")]) == 0
    assert (results / "laptop-report" / "report.md").exists()


def test_ctrl_c_during_report_is_one_line_and_leaves_the_older_report_whole(
    tmp_path, capsys, monkeypatch
):
    """Interrupted while rendering: exit 130, one line, and --out is as it was: the older report
    whole, nothing of the new one beside it, no temporary left (the report is written in a folder
    of its own and renamed into place only when whole)."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").write_text("an older report")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(build, "render_report", interrupted)
    golden = Path(__file__).parent / "data" / "golden_laptop.csv"
    assert main(["report", str(golden), "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "interrupted" in err and "is as it was" in err
    assert [p.name for p in out.iterdir()] == ["report.md"] and (
        out / "report.md"
    ).read_text() == "an older report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.process
def test_a_latin1_terminal_gets_replacements_not_a_crash(tmp_path):
    """compare prints — and ±: under a Latin-1 locale that was a UnicodeEncodeError and exit 1 (the
    'slower' code)."""
    golden = REPO / "tests" / "data" / "golden_h100.csv"
    env = dict(os.environ, PYTHONIOENCODING="latin-1")
    done = subprocess.run(
        [
            *GPUBENCH,
            "compare",
            str(golden),
            str(golden),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr.decode("latin-1")[-2000:]
    assert b"Traceback" not in done.stderr and b"cases compared" in done.stdout


def test_the_usage_page_lists_every_exit_code() -> None:
    """docs/usage.md's exit-code table is ExitCode, member for member, with the same meanings."""
    from gpubench.harness.core.exits import ExitCode

    page = (REPO / "docs" / "usage.md").read_text(encoding="utf-8")
    table = page.split("### Exit codes\n", 1)[1].split("\n### ", 1)[0]
    rows = [
        line.split("|")[1:4]
        for line in table.splitlines()
        if line.startswith("| ") and line[2].isdigit()
    ]
    assert [
        (int(code), name.strip().strip("`"), meaning.strip()) for code, name, meaning in rows
    ] == [(code.value, code.name, code.meaning) for code in ExitCode]


def test_a_build_interrupt_is_pytests_interrupt() -> None:
    from gpubench.harness.core.exits import BUILD_INTERRUPTED

    assert BUILD_INTERRUPTED == pytest.ExitCode.INTERRUPTED


@pytest.mark.parametrize(
    "argv, code, said",
    [
        (["rnu"], 2, "unknown command 'rnu' — did you mean 'run'?"),
        (
            ["run", "--devcie", "cpu"],
            4,
            "--devcie is not an option of gpubench run — did you mean --device?",
        ),
        (["ab", "--pairz=3"], 4, "--pairz is not an option of gpubench ab — did you mean --pairs?"),
    ],
)
def test_a_misspelt_command_or_option_is_named_with_the_one_meant_before_torch_loads(
    capsys, argv, code, said
):
    """--devcie went to pytest: 3 s of torch's import, then pytest's usage error naming an ini
    inside site-packages."""
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == code and said in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, code, said",
    [
        (
            ["run", "--buget", "1m"],
            4,
            "--buget is not an option of gpubench run — did you mean --budget?",
        ),
        (
            ["run", "--device"],
            4,
            "argument --device: expected one argument — see gpubench run --help",
        ),
        (["ab", "--pairs"], 4, "argument --pairs: expected one argument — see gpubench ab --help"),
        (["fleet", "--cluster", "slrum"], 2, "argument --cluster: invalid choice: 'slrum'"),
        (
            ["compare"],
            2,
            "the following arguments are required: base, new — see gpubench compare --help",
        ),
        (
            ["report", "results", "--bseline", "x"],
            2,
            "unrecognized arguments: --bseline x — did you mean --baseline?",
        ),
        (["env", "--bogus"], 2, "unrecognized arguments: --bogus — see gpubench env --help"),
        ([], 2, "the following arguments are required: command — see gpubench --help"),
    ],
)
def test_a_usage_error_is_one_line_and_exits_as_its_command_documents(capsys, argv, code, said):
    """argparse printed its usage block and exited 2 for every command, where run and ab document an
    option problem as refused before the first case (4) and the rest a bad argument as 2
    (ExitCode)."""
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    err = capsys.readouterr().err
    assert stopped.value.code == code and err.startswith("gpubench: error: ") and said in err
    assert err.count("\n") == 1 and "usage:" not in err


@pytest.mark.process
def test_an_option_typo_of_gpubench_run_is_one_line_exit_4_and_writes_nothing(tmp_path):
    """The README's promise for a bad option, from the command a user types (no torch import: under
    a second)."""
    done = subprocess.run(
        [sys.executable, "-m", "gpubench.harness.commands.cli", "run", "--buget", "1m"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout) == (4, "")
    assert done.stderr == (
        "gpubench: error: --buget is not an option of gpubench run — did you mean --budget? "
        "(options gpubench does not know go to pytest)\n"
    )
    assert list(tmp_path.iterdir()) == []


# pytest --help in a fresh process: the options of every plugin installed here
@pytest.mark.process
def test_no_option_pytest_knows_here_is_taken_for_a_typo_of_gpubenchs():
    from gpubench.harness.commands.cli import option_typos

    helped = subprocess.run(
        [sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    flags = sorted(set(re.findall(r"(?<![\w-])(--[a-zA-Z][\w-]*)", helped)))
    parser = build_parser()
    # pytest's own, pytest-benchmark's, pytest-xdist's, ... were read
    assert len(flags) > 50
    assert [
        (command, flag)
        for command in ("run", "ab", "fleet")
        for flag in flags
        if option_typos(parser, command, [flag])
    ] == []


def test_pytests_own_options_near_gpubenchs_still_go_to_pytest():
    from gpubench.harness.commands.cli import option_typos

    parser = build_parser()
    assert (
        option_typos(
            parser,
            "run",
            [
                "--profile-svg",
                "--timeout=60",
                "--durations=5",
                "--benchmark-json=x.json",
                "-k",
                "matmul",
            ],
        )
        is None
    )


def test_the_users_tests_are_collected_from_their_own_folder_so_their_ids_name_real_paths(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "test_x.py").write_text("")
    assert rootdir_for([str(tmp_path / "a"), str(tmp_path / "b" / "test_x.py")]) == tmp_path
    assert rootdir_for([str(tmp_path / "b" / "test_x.py")]) == tmp_path / "b"
    # the bundled suite: the checkout's or the installed package's folder
    assert rootdir_for([]) == SUITE_ROOT


def test_an_empty_selection_is_named_from_what_the_user_gave():
    tests_only = argparse.Namespace(tests=["mine/"])
    assert no_cases_line(tests_only, []).startswith(
        "--tests mine/: pytest collected no test there: nothing was run — name files"
    )
    assert (
        no_cases_line(tests_only, ["-k", "x"])
        == no_cases_line(argparse.Namespace(), ["-mslow"])
        == ("no case matched the selection: nothing was run (the -k/-m given matches no case)")
    )


@pytest.mark.process
@pytest.mark.parametrize("stdout", ["closed-pipe", "full-disk", "closed-descriptor"])
def test_a_standard_output_that_cannot_be_written_ends_no_run_and_loses_no_row(tmp_path, stdout):
    """`gpubench run | head -1` and `>/dev/full` ended the build in pytest's terminal writer
    (INTERNALERROR, exit 3)."""
    argv = [
        *GPUBENCH,
        "run",
        "--device",
        "cpu",
        "--profile",
        "smoke",
        "-k",
        "matmul[fp32-n64",
        "--results-dir",
        str(tmp_path),
        "--run-id",
        "r",
        "--no-report",
    ]
    # `>&-`: the fork server died before it was ready, builds started plainly
    if stdout == "closed-descriptor":
        done = subprocess.run(
            argv,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
            check=False,
            preexec_fn=lambda: os.close(1),
        )
        code, err = done.returncode, done.stderr
        assert code == 0 and "plain processes" not in err, err[-3000:]
        assert [row["status"] for row in read_rows(tmp_path / "r.csv")] == ["ok"]
        return
    if stdout == "full-disk":
        with open("/dev/full", "w") as full:
            done = subprocess.run(
                argv, stdout=full, stderr=subprocess.PIPE, text=True, timeout=300, check=False
            )
        code, err = done.returncode, done.stderr
    else:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # the reader went away before the first line, as `| head -0` would
        proc.stdout.close()
        err = proc.stderr.read()
        code = proc.wait(timeout=300)
    assert code == 0 and "INTERNALERROR" not in err, err[-3000:]
    assert "gpubench: standard output cannot be written (" in err
    assert [row["status"] for row in read_rows(tmp_path / "r.csv")] == ["ok"]


def test_a_report_that_cannot_be_written_after_a_run_exits_8_and_says_how_to_make_it_later(
    tmp_path, monkeypatch, capsys
):
    from gpubench.reports.render import build

    from gpubench.harness.core.exits import ExitCode, UsageError

    def refuse(*args, **kwargs):
        raise UsageError("another gpubench report is writing out/ — wait for it")

    monkeypatch.setattr(build, "build_report", refuse)
    # was 2 (bad input), then 0: every case had run, but the run's answer is not there
    assert (
        report_after_run([tmp_path / "r.csv"], tmp_path / "out", 0) == ExitCode.REPORT_NOT_WRITTEN
    )
    assert (
        "gpubench: report not written: another gpubench report is writing"
        in capsys.readouterr().err
    )


def test_a_selection_pytest_cannot_read_is_one_line_before_any_build(tmp_path, capsys):
    assert (
        main(["run", "--device", "cpu", "--results-dir", str(tmp_path / "r"), "-k", "matmul and ("])
        == 4
    )
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1
        and err.startswith("gpubench: error: -k 'matmul and (': pytest cannot read it (")
        and "fix the expression" in err
    )
    assert main(["run", "--device", "cpu", "--results-dir", str(tmp_path / "r"), "-mslow or"]) == 4
    assert not (tmp_path / "r").exists()


# a command started in a folder removed under it
@pytest.mark.process
def test_a_working_folder_removed_under_the_shell_is_one_line(tmp_path):
    import subprocess
    import sys

    from runs import REPO

    gone = tmp_path / "gone"
    gone.mkdir()
    script = (
        f"import os, sys; sys.path.insert(0, {str(REPO)!r}); os.chdir({str(gone)!r}); "
        f"os.rmdir({str(gone)!r}); from gpubench.harness.commands.cli import main; "
        "sys.exit(main(['run', '-k', 'matmul']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 4 and done.stderr.strip().splitlines() == [
        "gpubench: error: the working folder is gone (No such file or directory) — cd into a "
        "folder that exists, then run again"
    ], done.stderr


@pytest.mark.process
def test_python_dash_m_gpubench_is_the_command():
    import subprocess
    import sys

    from runs import REPO

    done = subprocess.run(
        [sys.executable, "-m", "gpubench", "report", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode == 0 and "usage: gpubench report" in done.stdout, done.stderr
