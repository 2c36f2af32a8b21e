"""A side of `gpubench ab`: its interpreter (--a-python, --b-python), seen to start Python 3 with
what a build imports before any build (a wrapper that never starts or a venv without torch would
fail every build of its side); each build's `BuildPlan`; and a launcher per side: a fork server
started with the side's interpreter and environment (its builds skip seconds of imports; what the
side changes reaches only them), or fresh interpreters under `--no-fork` or where the server rules
forking out; each side's results file as only its builds make it. Torch-free."""

from __future__ import annotations

import os
import shutil
import stat
import statistics
import subprocess
import sys
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO

from gpubench import IMPORT_ROOT
from gpubench.harness.core.exits import UsageError
from gpubench.harness.core.options import RunOptions
from gpubench.harness.pytest_plugin.forked import ForkLauncher
from gpubench.harness.processes.launch import Completed, Job, ProcessLauncher
from gpubench.harness.processes.lifetime import (
    adopting,
    child_pids,
    child_preexec,
    ended_unreaped,
    kill_adopted,
    kill_group,
)
from gpubench.harness.processes.protocol import BuildPlan
from gpubench.harness.processes.turns import SESSION_PID_ENV

BUILD_MODULE = "gpubench.harness.processes.build_main"
# a side variable's value, as printed and kept
REDACTED = "***"


@dataclass
class AbSide:
    """One side of a session: its interpreter, its environment variables, its arguments (as given:
    `args`; read: the run options they set over the session's in `run`, the rest pytest's in
    `pytest_args`)."""

    name: str
    python: str = sys.executable
    env: dict[str, str] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)
    run: RunOptions = RunOptions()
    pytest_args: list[str] = field(default_factory=list)

    def describe(self) -> dict[str, object]:
        """What is printed and kept in the session's marker: the variables' names, not their values
        (a token, say)."""
        return {
            "python": self.python,
            "env": {name: REDACTED for name in self.env},
            "args": self.args,
        }


def side_plan(
    side: AbSide,
    session_id: str,
    build: int,
    pairs: int,
    pytest_args: list[str],
    suite_root: Path | None = None,
    turns: str = "",
    cases: str = "",
) -> BuildPlan:
    """One build of one side. The config file is named, not found (see common.suite_args); the build
    tags its output files (X.json -> X.A-b3.json); no table_json: the session's verdict table is the
    one to read. `turns`: the build's part in a pair that takes turns (turns.TurnPlan), '' for a
    build that runs alone; `cases`: the file of the cases still undecided, '' for all."""
    config = (
        [f"--config-file={suite_root / 'benches' / 'suite.ini'}"] if suite_root is not None else []
    )
    run = replace(side.run, run_id=f"{session_id}-{side.name}", builds=pairs)
    return BuildPlan(
        build,
        list(side.pytest_args),
        [*config, *pytest_args],
        run,
        pairs,
        output_tag=f"{side.name}-b{build}",
        turns=turns,
        cases=cases,
    )


def side_env(side: AbSide) -> dict[str, str]:
    """The side's variables over this environment; gpubench's folder on PYTHONPATH, so a venv
    without gpubench finds the harness; this session's pid, so neither build counts its partner as a
    busy GPU."""
    env = dict(os.environ, **side.env)
    env[SESSION_PID_ENV] = str(os.getpid())
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(IMPORT_ROOT), env.get("PYTHONPATH")]))
    return env


def side_job(
    side: AbSide,
    session_id: str,
    build: int,
    pairs: int,
    pytest_args: list[str],
    suite_root: Path | None = None,
    turns: str = "",
    cases: str = "",
) -> Job:
    """One build of one side: forked from the side's server, or else `side.python -m build_main`."""
    plan = side_plan(side, session_id, build, pairs, pytest_args, suite_root, turns, cases)
    return Job([side.python, "-m", BUILD_MODULE], side_env(side), hold_sigint=True, plan=plan)


def side_launchers(
    sides: tuple[AbSide, AbSide], stopped_limit_s: float | None, fork: bool
) -> dict[str, ProcessLauncher]:
    """One launcher per side: a fork server each (started at the side's first build), or plain
    processes."""
    if not fork:
        return {side.name: ProcessLauncher(stopped_limit_s) for side in sides}
    return {
        side.name: ForkLauncher(
            stopped_limit_s, python=side.python, who=f"side {side.name}'s builds"
        )
        for side in sides
    }


def close_launchers(launchers: dict[str, ProcessLauncher]) -> None:
    """Ends each side's fork server (on every way out of the session: its end, Ctrl-C, an error)."""
    for launcher in launchers.values():
        if isinstance(launcher, ForkLauncher):
            launcher.close()


@dataclass
class StartUps:
    """Each side's build start-up as its builds measured it (fork or exec to first case), and how
    they started."""

    seconds: dict[str, list[float]] = field(default_factory=dict)
    how: dict[str, str] = field(default_factory=dict)

    def note(self, side: str, done: Completed, launcher: ProcessLauncher) -> None:
        forked = isinstance(launcher, ForkLauncher) and launcher.server is not None
        self.how[side] = "forked" if forked else "fresh interpreters"
        if done.answer is not None and done.answer.startup_s is not None:
            self.seconds.setdefault(side, []).append(done.answer.startup_s)

    def line(self) -> str | None:
        """'build start-up (...): A 0.38 s forked, B 0.41 s forked', None before any build
        answered."""
        parts = [
            f"{side} {statistics.median(values):.2f} s {self.how[side]} ({len(values)} builds)"
            for side, values in sorted(self.seconds.items())
        ]
        return (
            f"build start-up, process start to first case (median): {', '.join(parts)}"
            if parts
            else None
        )


PYTHON_FIX = "pass the python of a venv that has torch and gpubench's dependencies"


def interpreter(python: str, flag: str) -> str:
    """An interpreter's path; a bare name (python3) is looked up on PATH, as a shell would."""
    found = python if os.sep in python else shutil.which(python) or python
    if not (Path(found).is_file() and os.access(found, os.X_OK)):
        raise UsageError(f"{flag} {python}: not an executable interpreter — {PYTHON_FIX}")
    return found


# a venv's python on a slow network file system starts in seconds
START_DEADLINE_S = 30.0
# the Python major version and what a build imports but does not have (found, not imported: seconds
# saved)
PROBE = (
    "import sys, importlib.util as u; print('gpubench-probe', sys.version_info[0], "
    "','.join(m for m in ('torch', 'pytest', 'pytest_benchmark') if u.find_spec(m) is None) or '-')"
)


def starts_python(python: str, flag: str, deadline_s: float = START_DEADLINE_S) -> None:
    """`python -c PROBE` must print Python 3's answer within `deadline_s`: a wrapper that never
    starts Python (stuck on a lock, waiting for input) hung every build of its side. Run in its own
    session, its group killed after."""
    command = f"{python} -c {PROBE!r}"
    # under adopt_orphans: what the probe leaves is killed
    known = child_pids() if adopting() else None
    probe = subprocess.Popen(
        [python, "-c", PROBE],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=child_preexec(),
    )
    kept = bytearray()
    # a long banner never blocks it
    reader = threading.Thread(target=drain, args=(probe.stdout, kept), daemon=True)
    reader.start()
    started = ended_unreaped(probe.pid, deadline_s)
    # at the deadline, or what it left behind
    kill_group(probe.pid)
    probe.wait()
    if known is not None:
        kill_adopted(known, f"`{command}`")
    # one outside its group may hold the pipe: what came so far is enough
    reader.join(1.0)
    if not reader.is_alive():
        probe.stdout.close()
    said = bytes(kept).decode(errors="replace")
    # a wrapper that waits after its python: so would every build
    if not started and "gpubench-probe 3" in said:
        raise UsageError(
            f"{flag} {python}: `{command}` answered as Python 3 but did not exit within "
            f"{deadline_s:.0f} s (what does it run after python?) — {PYTHON_FIX}"
        )
    if not started:
        raise UsageError(
            f"{flag} {python}: `{command}` did not start Python within {deadline_s:.0f} s — "
            f"{PYTHON_FIX}"
        )
    if probe.returncode != 0 or "gpubench-probe 3" not in said:
        first = said.strip().splitlines()[0][:120] if said.strip() else "no output"
        raise UsageError(
            f"{flag} {python}: not a Python 3 interpreter (`{command}` exited {probe.returncode}: "
            f"{first}) — {PYTHON_FIX}"
        )
    missing = said.split("gpubench-probe 3", 1)[1].split()[:1]
    if missing and missing[0] != "-":
        raise UsageError(
            f"{flag} {python}: it has no {missing[0].replace(',', ', ')} — {PYTHON_FIX} "
            "(pip install gpubench there)"
        )


def drain(pipe: IO[bytes], kept: bytearray, limit: int = 4096) -> None:
    """Read `pipe` to its end, keeping its last `limit` bytes (the probe's answer comes last)."""
    for chunk in iter(lambda: pipe.read1(65536), b""):
        kept += chunk
        del kept[:-limit]


@dataclass
class SessionStop:
    """Why a session ended before its last pair: the exit code and a line naming what happened."""

    code: int
    line: str


@dataclass
class SideFiles:
    """Each side's results file as only this session's builds make it: absent until the side's first
    build, then the very file that build created (device and inode), holding the side's run id
    alone; another is never judged."""

    results_dir: Path
    session_id: str
    made: dict[str, tuple[int, int]] = field(default_factory=dict)

    def path(self, side: str) -> Path:
        return self.results_dir / f"{self.session_id}-{side}.csv"

    def taken(self, side: str) -> SessionStop | None:
        """Before the side's first build: its file must not exist yet."""
        path = self.path(side)
        if path.exists() or path.is_symlink():
            return SessionStop(
                4,
                f"{path} appeared before side {side}'s first build: another run took its name, "
                f"and it is not judged as side {side} — run the session again with another "
                "--run-id",
            )
        return None

    def note(self, side: str, code: int) -> None:
        """After the side's first build: the file it made; none when refused (exit 4: the name was
        taken)."""
        try:
            info = os.lstat(self.path(side))
        except OSError:
            return
        if code != 4 and stat.S_ISREG(info.st_mode):
            self.made[side] = (info.st_dev, info.st_ino)

    def defect(self, side: str, run_ids: set[str]) -> str | None:
        """Why the side's file is not this session's to judge, or None."""
        path, own = self.path(side), f"{self.session_id}-{side}"
        try:
            info = os.lstat(path)
            same = self.made.get(side) == (info.st_dev, info.st_ino)
        except OSError:
            same = False
        if not same:
            return (
                f"{path} is not the file side {side}'s builds made (replaced, or made by another "
                "run that took its name): not judged"
            )
        foreign = sorted(run_ids - {own})
        if foreign:
            return (
                f"{path} holds rows of run {foreign[0]!r}, not only side {side}'s ({own}): not "
                "judged"
            )
        return None
