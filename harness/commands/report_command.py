"""`gpubench report`: result CSVs merged into report.md, plots and a merged CSV."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpubench.harness.commands.common import fail
from gpubench.harness.core.exits import ExitCode, UsageError

PASSES_PYTEST_ARGS = False


def setup_arguments(sub: argparse._SubParsersAction) -> None:
    report = sub.add_parser("report", help="merge result CSVs into report.md, plots and a merged CSV")
    report.add_argument("results", nargs="+", type=Path, help="CSV files or folders of them")
    report.add_argument("--out", required=True, help="output folder")  # a str: Path("") would read as "."
    report.add_argument("--baseline", default=None, help="machine_id or hostname to compare the others against")


def run_from_args(args: argparse.Namespace, extra: list[str]) -> int:
    from gpubench.reports.build import build_report

    if not args.out:
        return fail("--out is empty — pass the report's folder (it is created if missing)")
    try:
        out = build_report(args.results, Path(args.out), args.baseline)
    except UsageError as error:
        return fail(str(error))
    except KeyboardInterrupt:
        return fail(f"interrupted: no report written ({args.out} is as it was) — run gpubench report again",
                    code=ExitCode.INTERRUPTED)
    print(f"gpubench: report -> {out}")
    return ExitCode.OK
