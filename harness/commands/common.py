"""What the subcommands share: the suite's folders, the one-line failure, a build's pytest command
line, the store resolved on the machine that runs, the report after a run."""

from __future__ import annotations

import argparse
import math
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from gpubench.harness.core.pytest_args import selections
from gpubench.harness.core.exits import NO_CASES_LINE, ExitCode, UsageError
from gpubench.harness.core.console import CONSOLE

if TYPE_CHECKING:
    from gpubench.harness.core.options import RunOptions

# The checkout's root, or the installed `gpubench` package's folder: either holds benches/ beside
# harness/.
SUITE_ROOT = Path(__file__).resolve().parents[2]
BENCHES = SUITE_ROOT / "benches"
USER_TEST_FILES = "bench_*.py test_*.py *_test.py"
SUITE_CONFIG = BENCHES / "suite.ini"
SUITE_PLUGIN = "gpubench.harness.pytest_plugin.suite"
# the suite's plugin, leaving --device and --profile to the user's conftest
OWN_TESTS_PLUGIN = "gpubench.harness.pytest_plugin.own_tests"


@dataclass
class ThrottledLine:
    """A session's progress in a log a person reads: a line when something changed, else one every
    `every_s` (a session of a hundred pairs printed a hundred lines that said the same)."""

    every_s: float = 30.0
    _last_s: float = -math.inf

    def say(self, line: str, changed: bool = False) -> None:
        now_s = time.monotonic()
        if changed or now_s - self._last_s >= self.every_s:
            self._last_s = now_s
            CONSOLE.say(line)


def fail(message: str, code: int = ExitCode.ERROR) -> int:
    CONSOLE.error(message)
    return int(code)


# `gpubench run --run-options JSON`: a fleet's job gets the options the fleet read, as they are
# (never re-read)
RUN_OPTIONS_FLAG = "run-options"


def read_options(args: argparse.Namespace) -> RunOptions:
    """The run options of a command's arguments, read and checked once (UsageError: the line that
    names the fix): from here on they travel as this value, to the build processes and to a fleet's
    jobs."""
    from gpubench.harness.catalog.profiles import check_profile
    from gpubench.harness.core.options import RunOptions, read_run_options

    if given := getattr(args, RUN_OPTIONS_FLAG.replace("-", "_"), None):
        try:
            return RunOptions.from_json(given)
        except ValueError as error:
            raise UsageError(
                f"--{RUN_OPTIONS_FLAG}: {error} — gpubench fleet writes this option itself"
            ) from None
    return read_run_options(
        lambda dest: getattr(args, dest, None), lambda name: check_profile(name).run_budget_s
    )


def suite_args(args: argparse.Namespace) -> list[str]:
    """The suite's part of a build's pytest command line: the suite (or the user's --tests), its
    configuration and plugins; the run options are no pytest argument (they ride in the build's
    plan)."""
    # The config file and plugin are named, not found: pytest looks for a config from the common
    # folder of every existing path on the command line (a --benchmark-json outside the checkout
    # made that "/": 0 cases), and an installed wheel has no conftest.py, only the plugin.
    tests = [str(Path(path).resolve()) for path in getattr(args, "tests", None) or []]
    # the user's test_*.py files are searched too
    own = ["-o", f"python_files={USER_TEST_FILES}"] if tests else []
    # no progress percentages: a build's console says its cases itself
    # (gpubench.harness.pytest_plugin.console)
    quiet = ["--benchmark-quiet", "-o", "console_output_style=classic"]
    # a CI's setting: pytest-benchmark is then named, not found
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        quiet = ["-p", "pytest_benchmark.plugin", *quiet]
    return [
        *(tests or [str(BENCHES)]),
        *quiet,
        f"--rootdir={rootdir_for(tests)}",
        f"--config-file={SUITE_CONFIG}",
        *own,
        "-p",
        OWN_TESTS_PLUGIN if tests else SUITE_PLUGIN,
        "-p",
        "no:cacheprovider",
    ]


def rootdir_for(tests: list[str]) -> Path:
    """pytest's rootdir, which test ids are relative to: the user's tests' common folder (ids
    outside it read as ../../ paths that name no file), else the suite's."""
    if not tests:
        return SUITE_ROOT
    return Path(
        os.path.commonpath(
            [path if Path(path).is_dir() else str(Path(path).parent) for path in tests]
        )
    )


def check_tests(args: argparse.Namespace) -> None:
    """--tests naming what is not there: one line, before any build."""
    missing = [path for path in getattr(args, "tests", None) or [] if not Path(path).exists()]
    if missing:
        raise UsageError(
            f"--tests {missing[0]}: no such file or folder — name your own test file or folder"
        )


def no_cases_line(args: argparse.Namespace, extra: list[str]) -> str:
    """Why a run collected no case, from what the user gave: a -k/-m, or --tests files without
    tests."""
    selects = bool(selections(extra))
    tests = getattr(args, "tests", None) or []
    if tests and not selects:
        return (
            f"--tests {' '.join(tests)}: pytest collected no test there: nothing was run — name "
            f"files that hold test_ functions ({USER_TEST_FILES.replace(' ', ', ')})"
        )
    return (
        "no case matched the selection: nothing was run (the -k/-m given matches no case)"
        if selects
        else NO_CASES_LINE
    )


def add_tests_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tests",
        action="append",
        metavar="PATH",
        help="your own pytest files or folders to time instead of the bundled suite (tests that "
        "use the gpubench fixture, e.g. gpubench.measure(step, name=...); repeatable)",
    )


def count_rows_safely(csv_path: Path) -> int:
    """Rows in the run's file, 0 when there is none (the build died before its first row)."""
    from gpubench.harness.records.results import count_rows

    return count_rows(csv_path) if csv_path.exists() else 0


NO_ROWS = "no rows were written"


def rows_kept(csv_path: Path) -> str:
    """'N rows kept in <csv> (each whole)' for a stop line, or NO_ROWS: it never names a file that
    is not there."""
    # records, not lines: a quoted reason may hold a newline
    kept = count_rows_safely(csv_path)
    return f"{kept} rows kept in {csv_path} (each whole)" if csv_path.exists() else NO_ROWS


# a row with figures: a case timed, or a time-to-accuracy run that stopped short of its target
MEASURED_STATUSES = ("ok", "unreached")


def nothing_measured(csv_path: Path) -> str | None:
    """The line for a run whose every row is out of memory or skipped (over budget, not for this
    device): rows, and no figure among them. None when something was measured or no row was
    written."""
    from gpubench.harness.records.results import row_statuses

    statuses = row_statuses(csv_path)
    if not statuses or any(statuses[status] for status in MEASURED_STATUSES):
        return None
    counts = ", ".join(f"{count} {status}" for status, count in sorted(statuses.items()))
    return (
        f"nothing was measured: the {statuses.total()} rows in {csv_path} are {counts} (each "
        "row's reason says why) — raise --budget, or select cases this device can hold (-k, "
        "--profile smoke)"
    )


def report_after_run(csvs: list[Path], out: Path, code: int) -> int:
    """The report over the run's rows; stopped (Ctrl-C, or a StopSignal under lifetime.stops_raised)
    it is not written, the rows stay whole, and the run exits as interrupted: the report can be made
    later."""
    from gpubench.reports.render.build import build_report

    try:
        report = build_report(csvs, out, baseline=None)
    # the run's rows are whole and its exit stays its own: the report can be made later
    except UsageError as error:
        CONSOLE.note(
            f"report not written: {error}; the rows are whole in {', '.join(map(str, csvs))} — "
            "run gpubench report on them later"
        )
        return code or ExitCode.REPORT_NOT_WRITTEN
    except KeyboardInterrupt as stop:
        kept = "; ".join(rows_kept(csv) for csv in csvs)
        CONSOLE.note(
            f"interrupted while writing the report: {kept}; the report was not written — "
            f"gpubench report {' '.join(map(str, csvs))} --out {out} makes it later"
        )
        return int(getattr(stop, "code", ExitCode.INTERRUPTED))
    from gpubench.reports.render.console import closing_lines

    CONSOLE.show("\n".join(closing_lines(csvs, report)))
    return code


def resolve_store(args: argparse.Namespace) -> None:
    """--store STORE: this machine's folder in the store becomes the run's results folder, resolved
    on the machine that runs (UsageError: a store that cannot take the run)."""
    run: RunOptions = args.run
    if run.store is None:
        return
    from gpubench.harness.devices.env import machine_identity
    from gpubench.harness.core.options import RESULTS_DIR_DEFAULT
    from gpubench.harness.records.store import others_can_remove, results_dir_for

    folder = str(results_dir_for(run.store, run.results_dir, RESULTS_DIR_DEFAULT, machine_identity))
    # the build processes get the resolved folder
    args.run = replace(run, results_dir=folder, store=None)
    removable = others_can_remove(Path(folder))
    # by every user: nothing is run
    if removable and removable[1]:
        raise UsageError(removable[0])
    if removable:
        CONSOLE.warn(removable[0])
