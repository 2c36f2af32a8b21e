"""`gpubench ab`: the same cases under two environments (an interpreter, variables, arguments), build by build in
alternation (A B, B A, ...), so the machine's drift hits both sides alike and cancels in the paired differences.
Each side is a normal run (`<session>-A.csv`, `-B.csv`); `<session>.ab.json` marks them as a pair for `compare`."""

from __future__ import annotations

import argparse
import json
import os
import signal
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from gpubench.harness.commands.ab_builds import AbSide, StartUps, close_launchers, side_job, side_launchers
from gpubench.harness.commands.side_python import START_DEADLINE_S, interpreter, starts_python
from gpubench.harness.processes.launch import (
    NO_TESTS, Completed, Job, ProcessLauncher, StopRequest, run_together, signal_name, stop_requests,
)
from gpubench.harness.processes.turns import PairPipes
from gpubench.harness.core.exits import BUILD_STOPS, NO_CASES_LINE
from gpubench.harness.records.safe_files import open_new, write_all

# A build's timed seconds per case. On a 2-core VM builds of 0.03 s disagreed ~35% a pair, 0.1 s ~20%, 0.3 s ~14%;
# with ~4 s of a pair outside its timed rounds, ~0.25 s a case buys the most resolution per second
# (docs/validation/ab-campaign.md).
DEFAULT_BUILD_SECONDS = 0.25
DEFAULT_BUILD_CALLS = 20  # ... but five calls of a slow case made builds of one side disagree up to 2x


def parse_env(pairs: list[str], flag: str) -> dict[str, str]:
    env = {}
    for item in pairs:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"{flag} {item!r}: use NAME=VALUE, such as {flag} OMP_NUM_THREADS=1")
        env[name] = value
    return env


# The session's own options: a side that set one would write elsewhere or under another name, unjudged.
SESSION_OPTIONS = ("--gpubench-results-dir", "--gpubench-run-id", "--gpubench-build", "--gpubench-builds",
                   "--gpubench-answer-fd", "--gpubench-output-tag", "--gpubench-cases", "--gpubench-deadline",
                   "--gpubench-turns")


def side_args(args: list[str], flag: str) -> list[str]:
    for arg in args:
        name = arg.split("=", 1)[0]
        if name in SESSION_OPTIONS:
            raise ValueError(f"{flag}={arg}: the session sets {name} for both sides — pass it to gpubench ab itself "
                             "(--results-dir, --run-id, --pairs)")
    return args


def sides_of(args: argparse.Namespace) -> tuple[AbSide, AbSide]:
    sides = []
    for name in ("a", "b"):
        python = interpreter(getattr(args, f"{name}_python") or sys.executable, f"--{name}-python")
        if python != sys.executable:
            starts_python(python, f"--{name}-python", START_DEADLINE_S)
        sides.append(AbSide(name.upper(), python, parse_env(getattr(args, f"{name}_env") or [], f"--{name}-env"),
                          side_args(list(getattr(args, f"{name}_arg") or []), f"--{name}-arg")))
    return sides[0], sides[1]


def order(pair: int, a: AbSide, b: AbSide) -> tuple[AbSide, AbSide]:
    """A B, B A, ...: each side runs first as often as second, so an effect of running second cancels too."""
    return (a, b) if pair % 2 == 0 else (b, a)


@dataclass
class Progress:
    pairs: int
    started_s: float = field(default_factory=time.monotonic)

    def line(self, done: int) -> str:
        spent_s = time.monotonic() - self.started_s
        eta = f", ETA {spent_s / done * (self.pairs - done):.0f} s" if done else ""
        return f"gpubench ab: pair {done}/{self.pairs} done ({spent_s:.0f} s{eta})"


@dataclass
class SessionStop:
    """Why a session ended before its last pair: the exit code and a line naming what happened."""
    code: int
    line: str


def launcher_stop(done: Completed, signum: int, side: AbSide, pair: int) -> SessionStop | None:
    """The SessionStop a signal to this session, or a build the launcher killed (stopped too long), means."""
    where = f"side {side.name}, build {pair + 1}"
    if signum:  # the build was told too (ProcessLauncher passes it on): the session stops after it, however it exited
        how = f" ({where} {done.stalled})" if done.stalled else ""
        return SessionStop(128 + signum, f"{signal_name(signum)} received: stopped after {where}{how}")
    if done.stalled:
        return SessionStop(128 + signal.SIGKILL, f"{where} {done.stalled}")
    return None


def build_stop(code: int, side: AbSide, pair: int, ran_first: bool) -> SessionStop | None:
    """The SessionStop a build's exit code means, or None when the session goes on."""
    where = f"side {side.name}, build {pair + 1}"
    if code == NO_TESTS and pair == 0:
        if ran_first:
            return SessionStop(NO_TESTS, NO_CASES_LINE)
        return SessionStop(4, f"{where} selected no case while the other side ran: give both sides the same selection "
                       f"(check --{side.name.lower()}-arg); the other side's rows are kept")
    if code < 0:
        return SessionStop(128 - code, f"{where}: the build process was killed by {signal_name(-code)}")
    if code in BUILD_STOPS:
        return SessionStop(code, f"{where} stopped with exit {code}")
    return None


def first_build_stop(code: int, side: AbSide, csv_path: Path) -> SessionStop | None:
    """A side whose first build recorded nothing would record nothing in every later one: stop now."""
    if csv_path.exists():
        return None
    flag = side.name.lower()
    return SessionStop(4, f"side {side.name}, build 1 recorded no row (exit {code}): it cannot run the suite — "
                          f"check --{flag}-python and --{flag}-arg (its output is above)")


@dataclass
class SideFiles:
    """Each side's results file as only this session's builds make it: absent until the side's first build, then
    the very file that build created (device and inode), holding the side's run id alone; another is never judged."""

    results_dir: Path
    session_id: str
    made: dict[str, tuple[int, int]] = field(default_factory=dict)

    def path(self, side: str) -> Path:
        return self.results_dir / f"{self.session_id}-{side}.csv"

    def taken(self, side: str) -> SessionStop | None:
        """Before the side's first build: its file must not exist yet."""
        path = self.path(side)
        if path.exists() or path.is_symlink():
            return SessionStop(4, f"{path} appeared before side {side}'s first build: another run took its name, "
                                  f"and it is not judged as side {side} — run the session again with another --run-id")
        return None

    def note(self, side: str, code: int) -> None:
        """After the side's first build: the file it made; none when refused (exit 4: the name was taken)."""
        try:
            info = os.lstat(self.path(side))
        except OSError:
            return
        if code != 4 and stat.S_ISREG(info.st_mode):
            self.made[side] = (info.st_dev, info.st_ino)

    def problem(self, side: str, run_ids: set[str]) -> str | None:
        """Why the side's file is not this session's to judge, or None."""
        path, own = self.path(side), f"{self.session_id}-{side}"
        try:
            info = os.lstat(path)
            same = self.made.get(side) == (info.st_dev, info.st_ino)
        except OSError:
            same = False
        if not same:
            return (f"{path} is not the file side {side}'s builds made (replaced, or made by another run that took "
                    "its name): not judged")
        foreign = sorted(run_ids - {own})
        if foreign:
            return f"{path} holds rows of run {foreign[0]!r}, not only side {side}'s ({own}): not judged"
        return None


# After each complete pair (given their count): the pytest arguments of the next pair's builds, or None when the
# session has what it came for (ab_sequential.Looks).
AfterPair = Callable[[int], "list[str] | None"]


def run_pairs(sides: tuple[AbSide, AbSide], session_id: str, pairs: int, pytest_args: list[str], suite_root: Path,
              results_dir: Path, stopped_limit_s: float | None = None,
              files: SideFiles | None = None, after_pair: AfterPair | None = None,
              fork: bool = True, turns: bool = True) -> tuple[int, SessionStop | None]:
    """Runs up to `pairs` pairs; returns (complete pairs, why the session stopped early or None). The first pair's
    builds run one after the other (each side shown able to run the suite alone); with `turns`, each later pair's
    two builds run at once, taking turns case by case. The fork servers end with the session, however it ends."""
    launchers, startups = side_launchers(sides, stopped_limit_s, fork), StartUps()
    pair_run = PairRun(sides, session_id, pairs, pytest_args, suite_root, files or SideFiles(results_dir, session_id),
                       launchers, startups)
    try:
        with turn_folder(turns) as folder:
            done, stop = pair_loop(pair_run, after_pair, folder)
    finally:
        close_launchers(launchers)
    if line := startups.line():
        print(f"gpubench ab: {line}", flush=True)
    return done, stop


@contextmanager
def turn_folder(turns: bool) -> Iterator[str | None]:
    """A private folder for the pairs' turn pipes, removed with the session; None without turns."""
    if not turns:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="gpubench-ab-turns-") as folder:
        yield folder


@dataclass
class PairRun:
    """What every build of the session shares: its sides, their launchers, the selection, the side files."""

    sides: tuple[AbSide, AbSide]
    session_id: str
    pairs: int
    pytest_args: list[str]
    suite_root: Path
    files: SideFiles
    launchers: dict[str, ProcessLauncher]
    startups: StartUps
    narrowed: list[str] = field(default_factory=list)

    def job(self, side: AbSide, pair: int, turns: str = "") -> Job:
        return side_job(side, self.session_id, pair, self.pairs, self.pytest_args + self.narrowed, self.suite_root,
                        turns)

    def judge(self, side: AbSide, pair: int, done: Completed, request: StopRequest,
              ran_first: bool) -> SessionStop | None:
        """What one finished build means for the session: None when it goes on."""
        self.startups.note(side.name, done, self.launchers[side.name])
        if pair == 0:
            self.files.note(side.name, done.code)
        request.signum = request.signum or done.signal
        stop = launcher_stop(done, request.signum, side, pair) or build_stop(done.code, side, pair, ran_first)
        if stop is None and pair == 0:
            stop = first_build_stop(done.code, side, self.files.path(side.name))
        return stop


def pair_loop(run: PairRun, after_pair: AfterPair | None, turn_folder: str | None) -> tuple[int, SessionStop | None]:
    """The pairs themselves: one build after the other, or (with a turn folder, after the first pair) both at once."""
    progress = Progress(run.pairs)
    with stop_requests() as request:
        for pair in range(run.pairs):
            if request.signum:  # arrived between two pairs: start no other
                return pair, SessionStop(128 + request.signum,
                                         f"{signal_name(request.signum)} received: no build started after it")
            first, second = order(pair, *run.sides)
            if turn_folder is None or pair == 0:
                stop = one_after_other(run, pair, (first, second), request)
            else:
                stop = taking_turns(run, pair, (first, second), request, turn_folder)
            if stop is not None:
                return pair, stop
            if after_pair is None:
                print(progress.line(pair + 1), flush=True)
            elif (more := after_pair(pair + 1)) is None:
                return pair + 1, None
            else:
                run.narrowed = more
    return run.pairs, None


def one_after_other(run: PairRun, pair: int, sides: tuple[AbSide, AbSide], request: StopRequest) -> SessionStop | None:
    for index, side in enumerate(sides):
        if request.signum:  # arrived between two builds: start no other
            return SessionStop(128 + request.signum,
                               f"{signal_name(request.signum)} received: no build started after it")
        taken = run.files.taken(side.name) if pair == 0 else None
        if taken is not None:
            return taken
        done = run.launchers[side.name].run(run.job(side, pair))
        if stop := run.judge(side, pair, done, request, ran_first=index == 0):
            return stop
    return None


def taking_turns(run: PairRun, pair: int, sides: tuple[AbSide, AbSide], request: StopRequest,
                 folder: str) -> SessionStop | None:
    """Both builds at once, case by case in turn; a build that ends frees the other to finish alone."""
    pipes = PairPipes(folder, pair, (sides[0].name, sides[1].name)).open()
    try:
        jobs = [(run.launchers[side.name], run.job(side, pair, pipes.plan(side.name, first=index == 0).to_text()))
                for index, side in enumerate(sides)]
        results = run_together(jobs, ended=lambda index: pipes.free(sides[1 - index].name))
    finally:
        pipes.close()
    for index, (side, done) in enumerate(zip(sides, results)):
        if stop := run.judge(side, pair, done, request, ran_first=index == 0):
            return stop
    return None


MARKER_MODE = 0o600  # the session's sides as given: a side's arguments may hold what others should not read


def write_marker(results_dir: Path, session_id: str, sides: tuple[AbSide, AbSide], pairs: int,
                 budget_s: float | None = None) -> Path:
    """`<session>.ab.json`, made new (O_EXCL, never through a link): a second session of that id is refused before
    it runs a build. With `budget_s` the session is sequential (`pairs` at most), and `compare` judges it so."""
    path = results_dir / f"{session_id}.ab.json"
    design = {"design": "fixed", "pairs_planned": pairs} if budget_s is None else {
        "design": "sequential", "max_pairs": pairs, "budget_s": budget_s}
    payload = {"session": session_id, **design, "order": "A B, B A, ...",
               "sides": {side.name: dict(side.describe(), run_id=f"{session_id}-{side.name}") for side in sides}}
    fd = open_new(path, "the session's marker", "remove the link, or pass another --run-id", mode=MARKER_MODE)
    try:
        write_all(fd, (json.dumps(payload, indent=2) + "\n").encode("utf-8"))
    except OSError:  # a full disk: no half marker left to refuse the next try of this id
        path.unlink(missing_ok=True)
        raise
    finally:
        os.close(fd)
    return path
