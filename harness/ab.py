"""`gpubench ab`: a paired A/B session. The same cases run under two environments on one machine,
build by build in alternation — A B, B A, A B, ... — each build in its own process, so the
machine's drift hits both sides alike and cancels in the paired differences (Chromium Pinpoint,
asv's --interleave-rounds). A side is an interpreter (`--a-python`: a venv with another torch),
environment variables (`--b-env OMP_NUM_THREADS=1`) and/or gpubench or pytest arguments
(`--b-arg=--gpubench-dataset=synthetic`).

Each side is a normal run (`<session>-A.csv`, `<session>-B.csv`, usable by `report`), and
`<session>.ab.json` marks them as a pair, so `gpubench compare` on the two files judges them
paired. Ctrl-C keeps every finished pair."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.launch import NO_TESTS, Job, ProcessLauncher
from harness.options import RESULTS_FULL_EXIT
from harness.safe_files import replace_bytes

STOP_CODES = (2, 3, 4, RESULTS_FULL_EXIT, 143)
DEFAULT_PAIRS = 8
DEFAULT_BUILD_SECONDS = 0.05  # more, shorter builds: the pairs are the units, not the rounds


@dataclass
class Side:
    name: str
    python: str = sys.executable
    env: dict[str, str] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)

    def describe(self) -> dict[str, object]:
        return {"python": self.python, "env": self.env, "args": self.args}


def parse_env(pairs: list[str], flag: str) -> dict[str, str]:
    env = {}
    for item in pairs:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"{flag} {item!r}: use NAME=VALUE, such as {flag} OMP_NUM_THREADS=1")
        env[name] = value
    return env


def sides_of(args: argparse.Namespace) -> tuple[Side, Side]:
    sides = []
    for name in ("a", "b"):
        python = getattr(args, f"{name}_python") or sys.executable
        if not (Path(python).is_file() and os.access(python, os.X_OK)):
            raise ValueError(f"--{name}-python {python}: not an executable interpreter — pass the python of a venv that has torch and gpubench's dependencies")
        sides.append(Side(name.upper(), python, parse_env(getattr(args, f"{name}_env") or [], f"--{name}-env"), list(getattr(args, f"{name}_arg") or [])))
    return sides[0], sides[1]


def side_argv(side: Side, session_id: str, build: int, pairs: int, pytest_args: list[str]) -> list[str]:
    return [side.python, "-m", "pytest", *pytest_args, *side.args, f"--gpubench-run-id={session_id}-{side.name}",
            f"--gpubench-build={build}", f"--gpubench-builds={pairs}"]


def side_env(side: Side, suite_root: Path) -> dict[str, str]:
    """The side's variables over this environment; the checkout on PYTHONPATH, so another
    interpreter (a venv without gpubench installed) finds the harness."""
    env = dict(os.environ, **side.env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(suite_root), env.get("PYTHONPATH")]))
    return env


def order(pair: int, a: Side, b: Side) -> tuple[Side, Side]:
    """A B, B A, A B, ...: each side runs first as often as second, so a warm-up or cache effect
    of running second cancels too."""
    return (a, b) if pair % 2 == 0 else (b, a)


@dataclass
class Progress:
    pairs: int
    started_s: float = field(default_factory=time.monotonic)

    def line(self, done: int) -> str:
        spent_s = time.monotonic() - self.started_s
        eta = f", ETA {spent_s / done * (self.pairs - done):.0f} s" if done else ""
        return f"gpubench ab: pair {done}/{self.pairs} done ({spent_s:.0f} s{eta})"


def run_pairs(sides: tuple[Side, Side], session_id: str, pairs: int, pytest_args: list[str], suite_root: Path) -> tuple[int, int]:
    """Runs the pairs; returns (complete pairs, the code that stopped the session or 0)."""
    launcher, progress = ProcessLauncher(), Progress(pairs)
    for pair in range(pairs):
        for side in order(pair, *sides):
            code = launcher.run(Job(side_argv(side, session_id, pair, pairs, pytest_args), side_env(side, suite_root))).code
            if code == NO_TESTS and pair == 0:
                print("gpubench ab: no case matched the selection (-k/-m): nothing was run", file=sys.stderr)
                return 0, NO_TESTS
            if code in STOP_CODES or code < 0:
                return pair, code if code >= 0 else 128 - code
        print(progress.line(pair + 1), flush=True)
    return pairs, 0


def write_marker(results_dir: Path, session_id: str, sides: tuple[Side, Side], pairs: int) -> Path:
    path = results_dir / f"{session_id}.ab.json"
    payload = {"session": session_id, "pairs_planned": pairs, "order": "A B, B A, ...",
               "sides": {side.name: dict(side.describe(), run_id=f"{session_id}-{side.name}") for side in sides}}
    # a random temporary inside the results folder, renamed: a link planted at the marker's name is replaced
    return replace_bytes(results_dir, path.name, (json.dumps(payload, indent=2) + "\n").encode("utf-8"), "results directory",
                         "pass --results-dir with the folder itself")
