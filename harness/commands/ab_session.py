"""A `gpubench ab` session once its arguments are read (gpubench.harness.commands.ab_command): check the
sides, write the marker, run the pairs, print the paired verdict."""

from __future__ import annotations

import argparse
import errno
import sys
from pathlib import Path

from gpubench.harness.commands.ab import (
    DEFAULT_BUILD_CALLS, DEFAULT_BUILD_SECONDS, AbSide, SideFiles, run_pairs, sides_of, write_marker,
)
from gpubench.harness.commands.ab_sequential import Looks
from gpubench.harness.commands.noise_report import print_noise_line, sides_frame
from gpubench.harness.commands.common import BENCHES, SUITE_ROOT, fail, pytest_args
from gpubench.harness.processes.cpu_readings import CpuWatch
from gpubench.harness.processes.lifetime import adopt_orphans
from gpubench.harness.processes.launch import NO_TESTS, stopped_limit_s
from gpubench.harness.core.exits import BUILD_INTERRUPTED, ExitCode, UsageError
from gpubench.harness.records.results import check_run_id, check_writable, new_run_id
from gpubench.harness.processes.rlimits import limits_problem
from gpubench.harness.records.safe_files import UnsafePath, make_folders
from gpubench.reports.compare import parse_threshold
from gpubench.reports.load import ReportError, load_results
from gpubench.reports.paired import format_session, judge_pair_of_runs

Design = tuple[int, "float | None"]  # (pairs at most, budget in seconds or None: a fixed design)


def check_session(args: argparse.Namespace, results_dir: Path) -> tuple[float, tuple[AbSide, AbSide], str]:
    """Everything else that can be refused before a build runs: (threshold, sides, session id)."""
    threshold = parse_threshold(args.threshold)
    sides = sides_of(args)
    if results_dir.exists() and not results_dir.is_dir():
        raise ValueError(f"--results-dir {results_dir} is a file, not a folder — pass a folder "
                         "(it is created if missing)")
    session_id = args.run_id or f"{new_run_id()}-ab"
    for side in sides:
        check_run_id(f"{session_id}-{side.name}", results_dir)
    try:
        make_folders(results_dir)
    except OSError as error:
        raise ValueError(f"--results-dir {results_dir} cannot be created ({error.strerror or error}) — "
                         "pass a folder you can write to") from None
    check_writable(results_dir)  # never a link: the marker and both sides' files go inside
    if problem := limits_problem():  # a tiny ulimit fails inside pytest or torch with no line of ours
        raise ValueError(problem)
    return threshold, sides, session_id


def marker_problem(results_dir: Path, session_id: str, sides: tuple[AbSide, AbSide], pairs: int,
                   budget_s: float | None = None) -> int:
    """Writes `<session>.ab.json`; a refusal is one line (exit 75 when the disk is full, else 4)."""
    try:
        write_marker(results_dir, session_id, sides, pairs, budget_s)
    except UnsafePath as error:  # a link planted at the marker's name
        return fail(str(error), code=4)
    except OSError as error:
        full, exists = error.errno in (errno.ENOSPC, errno.EDQUOT), isinstance(error, FileExistsError)
        why, fix = (("the results folder is full", "free space there or pass another --results-dir") if full
                    else ("a session of this id is there already", "pass another --run-id") if exists
                    else (error.strerror or str(error), "pass a --results-dir you can write to"))
        return fail(f"cannot write {results_dir / (session_id + '.ab.json')} ({why}): nothing was run — {fix}",
                    code=ExitCode.RESULTS_FULL if full else ExitCode.REFUSED)
    return ExitCode.OK


def cmd_ab(args: argparse.Namespace, extra: list[str], design: Design) -> int:
    """The session of `design` (ab_command.design_of)."""
    if not BENCHES.is_dir():
        return fail(f"benches/ not found beside the harness ({BENCHES}): reinstall gpubench (pip install gpubench, "
                    "or pip install -e . in a checkout)")
    results_dir = Path(args.results_dir)
    watch = CpuWatch()  # the machine over the whole session: steal and load for the noise line
    adopt_orphans()  # what a side's interpreter or build leaves behind (a daemon of its own) is killed when it ends
    try:
        threshold, sides, session_id = check_session(args, results_dir)
    except (ValueError, ReportError, UsageError, OSError) as error:
        return fail(str(error), code=4)
    pairs, budget_s = design
    args.run_id = None  # each side's run id is the session's
    args.build_seconds = args.build_seconds or DEFAULT_BUILD_SECONDS
    args.build_calls = args.build_calls or DEFAULT_BUILD_CALLS
    args.budget = "none"  # both sides measured whole: a cap on one side would be a difference
    if problem := marker_problem(results_dir, session_id, sides, pairs, budget_s):
        return problem
    plan = (f"{pairs} pairs" if budget_s is None
            else f"until every case is decided, {budget_s:.0f} s and {pairs} pairs at most")
    print(f"gpubench ab: session {session_id}: {plan}, A = {sides[0].describe()}, B = {sides[1].describe()}",
          flush=True)
    files = SideFiles(results_dir, session_id)
    looks = (Looks(results_dir, session_id, threshold, budget_s, pairs, least_build_s=args.build_seconds)
             if budget_s is not None else None)
    try:
        done, stop = run_pairs(sides, session_id, pairs, pytest_args(args, extra), SUITE_ROOT, results_dir,
                               stopped_limit_s(args.profile), files, looks, fork=not args.no_fork,
                               turns=not args.no_turns)
    finally:
        if looks is not None:
            looks.close()
    if stop is not None and stop.code == NO_TESTS:
        print(f"gpubench ab: {stop.line}", file=sys.stderr)
        if not any((results_dir / f"{session_id}-{side.name}.csv").exists() for side in sides):
            (results_dir / f"{session_id}.ab.json").unlink(missing_ok=True)  # a marker of no session would only mislead
        return NO_TESTS
    if stop is not None:
        print(f"gpubench ab: stopped: {stop.line}; {done} complete pair(s), kept in {results_dir}", file=sys.stderr)
    elif looks is not None:
        print(f"gpubench ab: ended: {looks.ended or f'--max-pairs {pairs} reached'}", flush=True)
    code = stop.code if stop else 0
    return judge_and_print(results_dir, session_id, threshold, code, files, sequential=looks is not None, watch=watch)


def judge_and_print(results_dir: Path, session_id: str, threshold: float, code: int,
                    files: SideFiles | None = None, sequential: bool = False, watch: CpuWatch | None = None) -> int:
    """The paired verdict of the session's two files; with `files`, only when each is the one its side made."""
    paths = [results_dir / f"{session_id}-{name}.csv" for name in ("A", "B")]
    missing = [path for path in paths if not path.exists()]
    if missing:
        side = missing[0].stem[-1]
        return code or fail(f"side {side} recorded no row ({missing[0]} is missing): its build processes ran but "
                            f"measured nothing — check --{side.lower()}-python and --{side.lower()}-arg")
    try:
        frames = load_results([paths[0]]), load_results([paths[1]])
        problems = [files.problem(name, set(frame["run_id"])) for name, frame in zip("AB", frames)] if files else []
        if any(problems):
            return fail(next(p for p in problems if p), code=code or 4)
        session = judge_pair_of_runs(*frames, threshold, ("A", "B"), sequential)
    except ReportError as error:  # stopped before a side recorded a row: the stop's code stands, not the report's 2
        return code or fail(str(error))
    print(format_session(session, threshold))
    if watch is not None:
        print_noise_line(sides_frame(*frames), watch, session.median_detectable, ("side", "case_id"))
    print(f"gpubench ab: A = {paths[0]}, B = {paths[1]} (each a normal run: gpubench report works on either)")
    if code:
        return ExitCode.INTERRUPTED if code in (BUILD_INTERRUPTED, ExitCode.INTERRUPTED) else code
    return session.exit_code
