"""`gpubench ab` from the command line: check the sides, run the pairs, print the paired verdict."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.ab import DEFAULT_BUILD_SECONDS, run_pairs, sides_of, write_marker
from harness.cli import BENCHES, SUITE_ROOT, fail, pytest_args
from harness.launch import MAX_BUILDS, NO_TESTS
from harness.results import RunIdError, check_run_id, check_writable, new_run_id
from harness.rlimits import limits_problem
from reports.compare import parse_threshold
from reports.load import ReportError, load_results
from reports.paired import format_session, judge_session


def cmd_ab(args: argparse.Namespace, extra: list[str]) -> int:
    if not BENCHES.is_dir():
        return fail(f"benches/ not found beside the harness ({BENCHES}): run gpubench from a source checkout (pip install -e .)")
    results_dir = Path(args.results_dir)
    try:
        threshold = parse_threshold(args.threshold)
        sides = sides_of(args)
        if not 3 <= args.pairs <= MAX_BUILDS:
            raise ValueError(f"--pairs {args.pairs}: use 3 to {MAX_BUILDS} (a paired verdict needs 3 pairs or more)")
        session_id = args.run_id or f"{new_run_id()}-ab"
        for side in sides:
            check_run_id(f"{session_id}-{side.name}", results_dir)
        check_writable(results_dir)  # made here, never a link: the marker and both sides' files go inside
        problem = limits_problem()  # a tiny ulimit fails inside pytest or torch with no line of ours
        if problem:
            raise ValueError(problem)
    except (ValueError, ReportError, RunIdError, OSError) as error:
        return fail(str(error), code=4)
    args.run_id, args.builds = None, None  # each side's run id and the build count are the session's
    args.build_seconds = args.build_seconds or DEFAULT_BUILD_SECONDS
    write_marker(results_dir, session_id, sides, args.pairs)
    print(f"gpubench ab: session {session_id}: {args.pairs} pairs, A = {sides[0].describe()}, B = {sides[1].describe()}", flush=True)
    done, code = run_pairs(sides, session_id, args.pairs, pytest_args(args, extra), SUITE_ROOT)
    if code == NO_TESTS:
        return NO_TESTS
    if code:
        print(f"gpubench ab: stopped (exit {code}) after {done} complete pair(s); the finished pairs are kept in {results_dir}", file=sys.stderr)
    return judge_and_print(results_dir, session_id, threshold, code)


def judge_and_print(results_dir: Path, session_id: str, threshold: float, code: int) -> int:
    paths = [results_dir / f"{session_id}-{name}.csv" for name in ("A", "B")]
    if not all(p.exists() for p in paths):
        return code or fail(f"no complete pair in {results_dir}: nothing to judge")
    try:
        session = judge_session(load_results([paths[0]]), load_results([paths[1]]), threshold)
    except ReportError as error:
        return fail(str(error))
    print(format_session(session, threshold))
    print(f"gpubench ab: A = {paths[0]}, B = {paths[1]} (each a normal run: gpubench report works on either)")
    if code:
        return 130 if code in (2, 130) else code
    return session.exit_code
