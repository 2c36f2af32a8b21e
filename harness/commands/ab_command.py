"""`gpubench ab` from the command line: its arguments and its design (fixed pairs or a budget). The
session itself (gpubench.harness.commands.ab) is imported only when one runs: its statistics
(pandas, scipy) take about a second to import, which every other gpubench command would pay."""

from __future__ import annotations

import argparse

from gpubench.harness.commands.common import (
    add_tests_argument,
    check_tests,
    read_options,
    resolve_store,
)
from gpubench.harness.core.exits import UsageError
from gpubench.harness.core.duration_text import parse_duration
from gpubench.harness.core.options import MAX_BUILDS

DEFAULT_BUDGET = "10m"
# launch.MAX_BUILDS: a build index beyond it is refused by the plugin
DEFAULT_MAX_PAIRS = 100

PASSES_PYTEST_ARGS = True


def setup_arguments(sub: argparse._SubParsersAction) -> None:
    from gpubench.harness.core.options import add_to_parser

    ab = sub.add_parser(
        "ab",
        help="paired A/B session: the same cases under two environments, builds alternating; "
        "verdict from the pairs",
        description="Runs the selected cases under side A and side B, build by build in "
        "alternation (A B, B A, ...), each build in its own process, and judges B against A from "
        "the paired differences after every pair: a decided case gets no more builds, and the "
        "session ends when every case is decided or the budget ends. Arguments gpubench does not "
        "know are passed to pytest (e.g. -k matmul, -m 'not slow').",
    )
    # a session's --budget is its own: every build runs whole
    add_to_parser(ab, leave_out=("--budget",))
    add_tests_argument(ab)
    ab.add_argument(
        "--budget",
        dest="session_budget",
        default=None,
        help=f"time the session may take, such as 90s, 5m or 1h (default {DEFAULT_BUDGET}): no "
        "pair starts that would not end within it",
    )
    ab.add_argument(
        "--max-pairs",
        type=int,
        default=None,
        help=f"pairs at most, however much budget is left (default {DEFAULT_MAX_PAIRS})",
    )
    ab.add_argument(
        "--pairs",
        type=int,
        default=None,
        help="instead of --budget: exactly N pairs, judged once at the end (a fixed design)",
    )
    for side in ("a", "b"):
        ab.add_argument(
            f"--{side}-python",
            default=None,
            help=f"interpreter of side {side.upper()} (default: this one), e.g. a venv with "
            "another torch",
        )
        ab.add_argument(
            f"--{side}-env",
            action="append",
            metavar="NAME=VALUE",
            help=f"an environment variable of side {side.upper()} (repeatable)",
        )
        ab.add_argument(
            f"--{side}-arg",
            action="append",
            metavar="ARG",
            help=f"an extra pytest/gpubench argument of side {side.upper()}, "
            f"e.g. --{side}-arg=--gpubench-dataset=synthetic (repeatable)",
        )
    ab.add_argument("--threshold", default="5%", help="change that counts (default 5%%)")
    ab.add_argument(
        "--no-fork",
        action="store_true",
        help="start each build as a fresh interpreter of its side (seconds of imports each) "
        "instead of forking it from the side's own process that imported torch once",
    )
    ab.add_argument(
        "--no-turns",
        action="store_true",
        help="run each pair's two builds one after the other instead of at once, taking turns "
        "case by case (each case's A and B timed back to back)",
    )


def run_from_args(args: argparse.Namespace, extra: list[str]) -> int:
    args.run = read_options(args)
    check_tests(args)
    resolve_store(args)
    design = design_of(args)
    from gpubench.harness.commands.ab import cmd_ab

    return cmd_ab(args, extra, design)


def session_budget_s(text: str) -> float:
    """A sequential session's budget in seconds (one duration syntax with `gpubench run
    --budget`)."""
    seconds = parse_duration(text)
    if seconds is None:
        raise UsageError(
            f"--budget {text!r}: a sequential session needs a time limit, such as 5m "
            "(or --pairs N for a fixed design)"
        )
    return seconds


def design_of(args: argparse.Namespace) -> tuple[int, float | None]:
    """(pairs at most, budget in seconds): the budget is None for a fixed design (--pairs N)."""
    fixed = args.pairs is not None
    if fixed and (args.session_budget is not None or args.max_pairs is not None):
        given = "--budget" if args.session_budget is not None else "--max-pairs"
        raise UsageError(
            f"--pairs {args.pairs} with {given}: --pairs runs exactly N pairs, "
            "--budget/--max-pairs stop when every case is decided — give one of the two"
        )
    pairs, flag = (
        (args.pairs, "--pairs") if fixed else (args.max_pairs or DEFAULT_MAX_PAIRS, "--max-pairs")
    )
    if not 3 <= pairs <= MAX_BUILDS:
        raise UsageError(
            f"{flag} {pairs}: use 3 to {MAX_BUILDS} (a paired verdict needs 3 pairs or more)"
        )
    if args.builds is not None:
        raise UsageError(
            f"--builds {args.builds}: a session's builds are its pairs — use --pairs {args.builds} "
            "or --max-pairs"
        )
    return pairs, None if fixed else session_budget_s(args.session_budget or DEFAULT_BUDGET)
