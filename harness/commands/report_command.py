"""`gpubench report`: result CSVs merged into report.md, plots and a merged CSV."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpubench.harness.commands.common import fail
from gpubench.harness.core.exits import ExitCode, UsageError
from gpubench.harness.core.console import CONSOLE

PASSES_PYTEST_ARGS = False


def setup_arguments(sub: argparse._SubParsersAction) -> None:
    report = sub.add_parser(
        "report", help="merge result CSVs into report.md, plots and a merged CSV"
    )
    report.add_argument("results", nargs="+", type=Path, help="CSV files or folders of them")
    # a str: Path("") would read as "."
    report.add_argument(
        "--out",
        default=None,
        help="output folder (default: beside the results, as gpubench run's: a folder's report/, "
        "a CSV's <name>-report/)",
    )
    report.add_argument(
        "--baseline", default=None, help="machine_id or hostname to compare the others against"
    )


def run_from_args(args: argparse.Namespace, extra: list[str]) -> int:
    from gpubench.reports.render.build import build_report

    if args.out == "":
        raise UsageError("--out is empty — pass the report's folder (it is created if missing)")
    folder = Path(args.out) if args.out else default_out(args.results)
    try:
        out = build_report(args.results, folder, args.baseline)
    except KeyboardInterrupt:
        return fail(
            f"interrupted: no report written ({folder} is as it was) — run gpubench report again",
            code=ExitCode.INTERRUPTED,
        )
    CONSOLE.say(f"report -> {out}")
    return ExitCode.OK


def default_out(results: list[Path]) -> Path:
    """Where a report goes without --out, beside its first input as `gpubench run` puts its own: a
    folder's report/ inside it (a report's merged.csv is never read back as a run), a CSV's
    <name>-report/ next to it."""
    first = results[0]
    return first / "report" if first.is_dir() else first.with_name(f"{first.stem}-report")
