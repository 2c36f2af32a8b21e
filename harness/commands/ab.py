"""`gpubench ab`: the same cases under two environments (an interpreter, variables, arguments),
build by build in alternation (A B, B A, ...), so the machine's drift hits both sides alike and
cancels in the paired differences. Each side is a normal run (`<session>-A.csv`, `-B.csv`);
`<session>.ab.json` marks them as a pair for `compare`. Imported only when a session runs
(ab_command): its statistics (pandas, scipy) take a second to import."""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path

from gpubench.harness.core.pytest_args import asks_verbose
from gpubench.harness.commands.ab_builds import (
    START_DEADLINE_S,
    AbSide,
    SessionStop,
    SideFiles,
    StartUps,
    close_launchers,
    interpreter,
    side_job,
    side_launchers,
    starts_python,
)
from gpubench.harness.commands.ab_sequential import Looks
from gpubench.harness.commands.common import (
    BENCHES,
    SUITE_ROOT,
    ThrottledLine,
    fail,
    read_options,
    suite_args,
)
from gpubench.harness.core.options import RUN_OPTIONS, RunOptions
from gpubench.harness.commands.noise_report import print_noise_line, sides_frame
from gpubench.harness.core.exits import (
    BUILD_INTERRUPTED,
    BUILD_STOPS,
    NO_CASES_LINE,
    ExitCode,
    UsageError,
)
from gpubench.harness.processes.cpu_readings import CpuWatch
from gpubench.harness.processes.launch import (
    NO_TESTS,
    Completed,
    Job,
    ProcessLauncher,
    StopRequest,
    run_together,
    signal_name,
    stop_requests,
    stopped_limit_s,
)
from gpubench.harness.processes.lifetime import adopt_orphans
from gpubench.harness.processes.rlimits import check_limits
from gpubench.harness.processes.turns import PairPipes
from gpubench.harness.records.results import check_run_id, check_writable, new_run_id
from gpubench.harness.records.safe_files import RefusedPath, make_folders, open_new, write_all
from gpubench.reports.judge.verdicts import parse_threshold
from gpubench.reports.judge.load import load_results
from gpubench.reports.render.paired import format_session
from gpubench.reports.judge.paired import judge_session
from gpubench.harness.core.console import CONSOLE

# A build's timed seconds per case. On a 2-core VM builds of 0.03 s disagreed ~35% a pair, 0.1 s
# ~20%, 0.3 s ~14%; with ~4 s of a pair outside its timed rounds, ~0.25 s a case buys the most
# resolution per second (docs/validation/ab-campaign.md).
DEFAULT_BUILD_SECONDS = 0.25
# ... but five calls of a slow case made builds of one side disagree up to 2x
DEFAULT_BUILD_CALLS = 20


def parse_env(pairs: list[str], flag: str) -> dict[str, str]:
    env = {}
    for item in pairs:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UsageError(f"{flag} {item!r}: use NAME=VALUE, such as {flag} OMP_NUM_THREADS=1")
        env[name] = value
    return env


# The session's own options: a side that set one would write elsewhere or under another name,
# unjudged.
SESSION_OPTIONS = ("results_dir", "store", "run_id", "builds", "budget")


def side_options(
    session: argparse.Namespace, args: list[str], flag: str
) -> tuple[RunOptions, list[str]]:
    """A side's run options: the session's, with those its arguments set (either form: --device or
    --gpubench-device) read once here; and the rest of its arguments, which are pytest's."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    for option in RUN_OPTIONS:
        parser.add_argument(
            option.namespaced, option.flag, **{**option.kwargs(), "default": argparse.SUPPRESS}
        )
    parser.add_argument("--gpubench-build", dest="build", type=int, default=argparse.SUPPRESS)
    try:
        given, rest = parser.parse_known_args(args)
    except argparse.ArgumentError as error:
        raise UsageError(f"{flag}: {error}") from None
    if owned := next((name for name in SESSION_OPTIONS + ("build",) if name in vars(given)), None):
        raise UsageError(
            f"{flag}: the session sets --{owned.replace('_', '-')} for both sides — pass it to "
            "gpubench ab itself (--results-dir, --store, --run-id, --pairs, --budget)"
        )
    return read_options(argparse.Namespace(**{**vars(session), **vars(given)})), rest


def sides_of(args: argparse.Namespace) -> tuple[AbSide, AbSide]:
    sides = []
    for name in ("a", "b"):
        python = interpreter(getattr(args, f"{name}_python") or sys.executable, f"--{name}-python")
        if python != sys.executable:
            starts_python(python, f"--{name}-python", START_DEADLINE_S)
        given = list(getattr(args, f"{name}_arg") or [])
        run, rest = side_options(args, given, f"--{name}-arg")
        sides.append(
            AbSide(
                name.upper(),
                python,
                parse_env(getattr(args, f"{name}_env") or [], f"--{name}-env"),
                given,
                session_run(run, args.run),
                rest,
            )
        )
    return sides[0], sides[1]


def session_run(side: RunOptions, session: RunOptions) -> RunOptions:
    """What the session sets on both sides: one results folder, builds whole (a cap on one side
    would be a difference), the session's build length unless the side chose its own."""
    return replace(
        side,
        results_dir=session.results_dir,
        store=None,
        run_budget_s=None,
        build_seconds=side.build_seconds or DEFAULT_BUILD_SECONDS,
        build_calls=side.build_calls or DEFAULT_BUILD_CALLS,
    )


def order(pair: int, a: AbSide, b: AbSide) -> tuple[AbSide, AbSide]:
    """A B, B A, ...: each side runs first as often as second, so an effect of running second
    cancels too."""
    return (a, b) if pair % 2 == 0 else (b, a)


# After each complete pair (given their count): the file of the cases the next pair's builds run (''
# for all), or None when the session has what it came for (ab_sequential.Looks).
AfterPair = Callable[[int], "str | None"]


def run_pairs(
    sides: tuple[AbSide, AbSide],
    session_id: str,
    pairs: int,
    pytest_args: list[str],
    suite_root: Path,
    results_dir: Path,
    stopped_limit_s: float | None = None,
    files: SideFiles | None = None,
    after_pair: AfterPair | None = None,
    fork: bool = True,
    turns: bool = True,
) -> tuple[int, SessionStop | None]:
    """Runs up to `pairs` pairs; returns (complete pairs, why the session stopped early or None).
    The first pair's builds run one after the other (each side shown able to run the suite alone);
    with `turns`, each later pair's two builds run at once, taking turns case by case. The fork
    servers end with the session, however it ends."""
    launchers, startups = side_launchers(sides, stopped_limit_s, fork), StartUps()
    pair_run = PairRun(
        sides,
        session_id,
        pairs,
        pytest_args,
        suite_root,
        files or SideFiles(results_dir, session_id),
        launchers,
        startups,
    )
    try:
        folder_of_turns = (
            tempfile.TemporaryDirectory(prefix="gpubench-ab-turns-") if turns else nullcontext()
        )
        # the turn pipes' private folder, removed with the session
        with folder_of_turns as folder:
            done, stop = pair_loop(pair_run, after_pair, folder)
    finally:
        close_launchers(launchers)
    if line := startups.line():
        CONSOLE.say(line)
    return done, stop


@dataclass
class PairRun:
    """What every build of the session shares: its sides, their launchers, the selection, the side
    files."""

    sides: tuple[AbSide, AbSide]
    session_id: str
    pairs: int
    pytest_args: list[str]
    suite_root: Path
    files: SideFiles
    launchers: dict[str, ProcessLauncher]
    startups: StartUps
    # the file of the cases still undecided, '' for all
    cases: str = ""

    def job(self, side: AbSide, pair: int, turns: str = "") -> Job:
        return side_job(
            side,
            self.session_id,
            pair,
            self.pairs,
            self.pytest_args,
            self.suite_root,
            turns,
            self.cases,
        )

    def judge(
        self, side: AbSide, pair: int, done: Completed, request: StopRequest, ran_first: bool
    ) -> SessionStop | None:
        """What one finished build means for the session: None when it goes on. A signal to this
        session stops it after the build (told too: ProcessLauncher passes it on), however the build
        exited."""
        self.startups.note(side.name, done, self.launchers[side.name])
        if pair == 0:
            self.files.note(side.name, done.code)
        request.signum = signum = request.signum or done.signal
        where, flag, code = f"side {side.name}, build {pair + 1}", side.name.lower(), done.code
        if signum:
            how = f" ({where} {done.stalled})" if done.stalled else ""
            return SessionStop(
                128 + signum, f"{signal_name(signum)} received: stopped after {where}{how}"
            )
        # the launcher killed it: stopped too long
        if done.stalled:
            return SessionStop(128 + signal.SIGKILL, f"{where} {done.stalled}")
        if code == NO_TESTS and pair == 0:
            if ran_first:
                return SessionStop(NO_TESTS, NO_CASES_LINE)
            return SessionStop(
                4,
                f"{where} selected no case while the other side ran: give both sides the same "
                f"selection (check --{flag}-arg); the other side's rows are kept",
            )
        if code < 0:
            return SessionStop(
                128 - code, f"{where}: the build process was killed by {signal_name(-code)}"
            )
        if code in BUILD_STOPS:
            return SessionStop(code, f"{where} stopped with exit {code}")
        # nothing now: nothing in every later build either
        if pair == 0 and not self.files.path(side.name).exists():
            return SessionStop(
                4,
                f"{where} recorded no row (exit {code}): it cannot run the suite — "
                f"check --{flag}-python and --{flag}-arg (its output is above)",
            )
        return None


def pair_loop(
    run: PairRun, after_pair: AfterPair | None, turn_folder: str | None
) -> tuple[int, SessionStop | None]:
    """The pairs themselves: one build after the other, or (with a turn folder, after the first
    pair) both at once."""
    started_s, line = time.monotonic(), ThrottledLine()
    with stop_requests() as request:
        for pair in range(run.pairs):
            # arrived between two pairs: start no other
            if request.signum:
                return pair, SessionStop(
                    128 + request.signum,
                    f"{signal_name(request.signum)} received: no build started after it",
                )
            first, second = order(pair, *run.sides)
            if turn_folder is None or pair == 0:
                stop = one_after_other(run, pair, (first, second), request)
            else:
                stop = taking_turns(run, pair, (first, second), request, turn_folder)
            if stop is not None:
                return pair, stop
            if after_pair is None:
                done, spent_s = pair + 1, time.monotonic() - started_s
                line.say(
                    f"pair {done}/{run.pairs} done ({spent_s:.0f} s, "
                    f"ETA {spent_s / done * (run.pairs - done):.0f} s)",
                    changed=done == 1,
                )
            elif (more := after_pair(pair + 1)) is None:
                return pair + 1, None
            else:
                run.cases = more
    return run.pairs, None


def one_after_other(
    run: PairRun, pair: int, sides: tuple[AbSide, AbSide], request: StopRequest
) -> SessionStop | None:
    for index, side in enumerate(sides):
        # arrived between two builds: start no other
        if request.signum:
            return SessionStop(
                128 + request.signum,
                f"{signal_name(request.signum)} received: no build started after it",
            )
        taken = run.files.taken(side.name) if pair == 0 else None
        if taken is not None:
            return taken
        done = run.launchers[side.name].run(run.job(side, pair))
        if stop := run.judge(side, pair, done, request, ran_first=index == 0):
            return stop
    return None


def taking_turns(
    run: PairRun, pair: int, sides: tuple[AbSide, AbSide], request: StopRequest, folder: str
) -> SessionStop | None:
    """Both builds at once, case by case in turn; a build that ends frees the other to finish
    alone."""
    pipes = PairPipes(folder, pair, (sides[0].name, sides[1].name)).open()
    try:
        jobs = [
            (
                run.launchers[side.name],
                run.job(side, pair, pipes.plan(side.name, first=index == 0).to_text()),
            )
            for index, side in enumerate(sides)
        ]
        results = run_together(jobs, ended=lambda index: pipes.free(sides[1 - index].name))
    finally:
        pipes.close()
    for index, (side, done) in enumerate(zip(sides, results)):
        if stop := run.judge(side, pair, done, request, ran_first=index == 0):
            return stop
    return None


# the session's sides as given: a side's arguments may hold what others should not read
MARKER_MODE = 0o600


def write_marker(
    results_dir: Path,
    session_id: str,
    sides: tuple[AbSide, AbSide],
    pairs: int,
    budget_s: float | None = None,
) -> Path:
    """`<session>.ab.json`, made new (O_EXCL, never through a link): a second session of that id is
    refused before it runs a build. With `budget_s` the session is sequential (`pairs` at most), and
    `compare` judges it so."""
    path = results_dir / f"{session_id}.ab.json"
    design = (
        {"design": "fixed", "pairs_planned": pairs}
        if budget_s is None
        else {"design": "sequential", "max_pairs": pairs, "budget_s": budget_s}
    )
    payload = {
        "session": session_id,
        **design,
        "order": "A B, B A, ...",
        "sides": {
            side.name: dict(side.describe(), run_id=f"{session_id}-{side.name}") for side in sides
        },
    }
    fd = open_new(
        path, "the session's marker", "remove the link, or pass another --run-id", mode=MARKER_MODE
    )
    try:
        write_all(fd, (json.dumps(payload, indent=2) + "\n").encode("utf-8"))
    # a full disk: no half marker left to refuse the next try of this id
    except OSError:
        path.unlink(missing_ok=True)
        raise
    finally:
        os.close(fd)
    return path


# (pairs at most, budget in seconds or None: a fixed design)
Design = tuple[int, "float | None"]


def check_session(
    args: argparse.Namespace, results_dir: Path
) -> tuple[float, tuple[AbSide, AbSide], str]:
    """Everything else that can be refused before a build runs: (threshold, sides, session id)."""
    threshold = parse_threshold(args.threshold)
    sides = sides_of(args)
    if results_dir.exists() and not results_dir.is_dir():
        raise UsageError(
            f"--results-dir {results_dir} is a file, not a folder — pass a folder "
            "(it is created if missing)"
        )
    session_id = args.run.run_id or f"{new_run_id()}-ab"
    for side in sides:
        check_run_id(f"{session_id}-{side.name}", results_dir)
    try:
        make_folders(results_dir)
    except OSError as error:
        raise UsageError(
            f"--results-dir {results_dir} cannot be created ({error.strerror or error}) — "
            "pass a folder you can write to"
        ) from None
    # never a link: the marker and both sides' files go inside
    check_writable(results_dir)
    # a tiny ulimit fails inside pytest or torch with no line of ours
    check_limits()
    return threshold, sides, session_id


def write_marker_exit(
    results_dir: Path,
    session_id: str,
    sides: tuple[AbSide, AbSide],
    pairs: int,
    budget_s: float | None = None,
) -> int:
    """Writes `<session>.ab.json`; its exit code: 0, or a refusal's (its line said; 75 when the disk
    is full, else 4)."""
    try:
        write_marker(results_dir, session_id, sides, pairs, budget_s)
    # a link planted at the marker's name
    except RefusedPath as error:
        return fail(str(error), code=4)
    except OSError as error:
        full, exists = (
            error.errno in (errno.ENOSPC, errno.EDQUOT),
            isinstance(error, FileExistsError),
        )
        why, fix = (
            ("the results folder is full", "free space there or pass another --results-dir")
            if full
            else ("a session of this id is there already", "pass another --run-id")
            if exists
            else (error.strerror or str(error), "pass a --results-dir you can write to")
        )
        return fail(
            f"cannot write {results_dir / (session_id + '.ab.json')} ({why}): nothing was run — "
            f"{fix}",
            code=ExitCode.RESULTS_FULL if full else ExitCode.REFUSED,
        )
    return ExitCode.OK


def cmd_ab(args: argparse.Namespace, extra: list[str], design: Design) -> int:
    """The session of `design` (ab_command.design_of)."""
    if not BENCHES.is_dir():
        return fail(
            f"benches/ not found beside the harness ({BENCHES}): reinstall gpubench (pip install "
            "gpubench, or pip install -e . in a checkout)"
        )
    results_dir = Path(args.run.results_dir)
    # the machine over the whole session: steal and load for the noise line
    watch = CpuWatch()
    # what a side's interpreter or build leaves behind (a daemon of its own) is killed when it ends
    adopt_orphans()
    try:
        threshold, sides, session_id = check_session(args, results_dir)
    except (UsageError, OSError) as error:
        return fail(str(error), code=ExitCode.REFUSED)
    pairs, budget_s = design
    if code := write_marker_exit(results_dir, session_id, sides, pairs, budget_s):
        return code
    plan = (
        f"{pairs} pairs"
        if budget_s is None
        else f"until every case is decided, {budget_s:.0f} s and {pairs} pairs at most"
    )
    CONSOLE.say(
        f"session {session_id}: {plan}, A = {sides[0].describe()}, B = {sides[1].describe()}"
    )
    files = SideFiles(results_dir, session_id)
    looks = (
        Looks(
            results_dir,
            session_id,
            threshold,
            budget_s,
            pairs,
            least_build_s=session_run(args.run, args.run).build_seconds,
        )
        if budget_s is not None
        else None
    )
    # each pair's line speaks for its builds (pytest_plugin.console)
    quiet = [] if asks_verbose(extra) else ["-q"]
    try:
        done, stop = run_pairs(
            sides,
            session_id,
            pairs,
            [*suite_args(args), *extra, *quiet],
            SUITE_ROOT,
            results_dir,
            stopped_limit_s(args.run.profile),
            files,
            looks,
            fork=not args.no_fork,
            turns=not args.no_turns,
        )
    finally:
        if looks is not None:
            looks.close()
    if stop is not None and stop.code == NO_TESTS:
        CONSOLE.note(stop.line)
        if not any((results_dir / f"{session_id}-{side.name}.csv").exists() for side in sides):
            # a marker of no session would only mislead
            (results_dir / f"{session_id}.ab.json").unlink(missing_ok=True)
        return NO_TESTS
    if stop is not None:
        CONSOLE.note(f"stopped: {stop.line}; {done} complete pair(s), kept in {results_dir}")
    elif looks is not None:
        CONSOLE.say(f"ended: {looks.ended or f'--max-pairs {pairs} reached'}")
    code = stop.code if stop else 0
    return judge_and_print(
        results_dir, session_id, threshold, code, files, sequential=looks is not None, watch=watch
    )


def judge_and_print(
    results_dir: Path,
    session_id: str,
    threshold: float,
    code: int,
    files: SideFiles | None = None,
    sequential: bool = False,
    watch: CpuWatch | None = None,
) -> int:
    """The paired verdict of the session's two files; with `files`, only when each is the one its
    side made."""
    paths = [results_dir / f"{session_id}-{name}.csv" for name in ("A", "B")]
    missing = [path for path in paths if not path.exists()]
    if missing:
        side = missing[0].stem[-1]
        return code or fail(
            f"side {side} recorded no row ({missing[0]} is missing): its build processes ran but "
            f"measured nothing — check --{side.lower()}-python and --{side.lower()}-arg"
        )
    try:
        frames = load_results([paths[0]]), load_results([paths[1]])
        problems = (
            [files.defect(name, set(frame["run_id"])) for name, frame in zip("AB", frames)]
            if files
            else []
        )
        if any(problems):
            return fail(next(p for p in problems if p), code=code or 4)
        session = judge_session(*frames, threshold, ("A", "B"), sequential)
    # stopped before a side recorded a row: the stop's code stands, not the report's 2
    except UsageError as error:
        return code or fail(str(error))
    CONSOLE.show(format_session(session, threshold))
    if watch is not None:
        print_noise_line(
            sides_frame(*frames), watch, session.median_detectable, ("side", "case_id")
        )
    CONSOLE.say(
        f"A = {paths[0]}, B = {paths[1]} (each a normal run: gpubench report works on either)"
    )
    if code:
        return ExitCode.INTERRUPTED if code in (BUILD_INTERRUPTED, ExitCode.INTERRUPTED) else code
    return session.exit_code
