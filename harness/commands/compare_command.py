"""`gpubench compare`: two runs case by case; exit 1 on a significant slowdown or a case BASE
measured and NEW did not (failed, or held back by its run budget: too slow now to fit), 6 when rows
flagged busy alone could have made a difference (reports/judge/busy.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpubench.harness.core.console import CONSOLE

PASSES_PYTEST_ARGS = False


def setup_arguments(sub: argparse._SubParsersAction) -> None:
    compare = sub.add_parser(
        "compare",
        help="compare two runs case by case; exit 1 on a significant slowdown or a "
        "case NEW no longer measured (failed, or over its budget share), 6 when rows flagged busy "
        "alone could have made a difference",
    )
    compare.add_argument("base", type=Path)
    compare.add_argument("new", type=Path)
    compare.add_argument(
        "--threshold", default="5%", help="slowdown that fails the comparison (default 5%%)"
    )


def run_from_args(args: argparse.Namespace, extra: list[str]) -> int:
    from gpubench.reports.render.compare import compare_paths
    from gpubench.reports.judge.verdicts import parse_threshold

    text, code = compare_paths(args.base, args.new, parse_threshold(args.threshold))
    CONSOLE.show(text)
    return code
