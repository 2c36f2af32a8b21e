"""How `gpubench ab` starts a side's builds: each build's `BuildPlan`, and a launcher per side: a fork server started
with the side's interpreter and environment (its builds skip seconds of imports; what the side changes reaches only
them), or fresh interpreters under `--no-fork` or where the server rules forking out. Torch-free."""

from __future__ import annotations

import os
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

from gpubench import IMPORT_ROOT
from gpubench.harness.processes.forked import ForkLauncher
from gpubench.harness.processes.launch import Completed, Job, ProcessLauncher
from gpubench.harness.processes.protocol import BuildPlan
from gpubench.harness.processes.turns import SESSION_PID_ENV

BUILD_MODULE = "gpubench.harness.processes.build_main"
REDACTED = "***"  # a side variable's value, as printed and kept


@dataclass
class AbSide:
    """One side of a session: its interpreter, its environment variables, its pytest/gpubench arguments."""

    name: str
    python: str = sys.executable
    env: dict[str, str] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)

    def describe(self) -> dict[str, object]:
        """What is printed and kept in the session's marker: the variables' names, not their values (a token, say)."""
        return {"python": self.python, "env": {name: REDACTED for name in self.env}, "args": self.args}


def side_plan(side: AbSide, session_id: str, build: int, pairs: int, pytest_args: list[str],
              suite_root: Path | None = None, turns: str = "") -> BuildPlan:
    """One build of one side. The config file is named, not found (see common.suite_options); the build tags its
    output files (X.json -> X.A-b3.json); no table_json: the session's verdict table is the one to read. `turns`:
    the build's part in a pair that takes turns (turns.TurnPlan), '' for a build that runs alone."""
    config = [f"--config-file={suite_root / 'benches' / 'suite.ini'}"] if suite_root is not None else []
    session = [f"--gpubench-run-id={session_id}-{side.name}", f"--gpubench-builds={pairs}"]
    return BuildPlan(build, list(side.args), [*config, *pytest_args, *session], pairs,
                     output_tag=f"{side.name}-b{build}", turns=turns)


def side_env(side: AbSide) -> dict[str, str]:
    """The side's variables over this environment; gpubench's folder on PYTHONPATH, so a venv without gpubench
    finds the harness; this session's pid, so neither build counts its partner as a busy GPU."""
    env = dict(os.environ, **side.env)
    env[SESSION_PID_ENV] = str(os.getpid())
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(IMPORT_ROOT), env.get("PYTHONPATH")]))
    return env


def side_job(side: AbSide, session_id: str, build: int, pairs: int, pytest_args: list[str],
             suite_root: Path | None = None, turns: str = "") -> Job:
    """One build of one side: forked from the side's server, or else `side.python -m build_main`."""
    plan = side_plan(side, session_id, build, pairs, pytest_args, suite_root, turns)
    return Job([side.python, "-m", BUILD_MODULE], side_env(side), hold_sigint=True, plan=plan)


def side_launchers(sides: tuple[AbSide, AbSide], stopped_limit_s: float | None,
                   fork: bool) -> dict[str, ProcessLauncher]:
    """One launcher per side: a fork server each (started at the side's first build), or plain processes."""
    if not fork:
        return {side.name: ProcessLauncher(stopped_limit_s) for side in sides}
    return {side.name: ForkLauncher(stopped_limit_s, python=side.python, who=f"side {side.name}'s builds")
            for side in sides}


def close_launchers(launchers: dict[str, ProcessLauncher]) -> None:
    """Ends each side's fork server (on every way out of the session: its end, Ctrl-C, an error)."""
    for launcher in launchers.values():
        if isinstance(launcher, ForkLauncher):
            launcher.close()


@dataclass
class StartUps:
    """Each side's build start-up as its builds measured it (fork or exec to first case), and how they started."""

    seconds: dict[str, list[float]] = field(default_factory=dict)
    how: dict[str, str] = field(default_factory=dict)

    def note(self, side: str, done: Completed, launcher: ProcessLauncher) -> None:
        forked = isinstance(launcher, ForkLauncher) and launcher.server is not None
        self.how[side] = "forked" if forked else "fresh interpreters"
        if done.answer is not None and done.answer.startup_s is not None:
            self.seconds.setdefault(side, []).append(done.answer.startup_s)

    def line(self) -> str | None:
        """'build start-up (...): A 0.38 s forked, B 0.41 s forked', None before any build answered."""
        parts = [f"{side} {statistics.median(values):.2f} s {self.how[side]} ({len(values)} builds)"
                 for side, values in sorted(self.seconds.items())]
        return f"build start-up, process start to first case (median): {', '.join(parts)}" if parts else None
