"""`gpubench ab`'s builds forked from one fork server per side
(gpubench.harness.commands.ab_builds): each side's server runs the side's interpreter and
environment, so its builds see the side's variables and never the other side's; `--no-fork` starts
every build as a fresh interpreter of its side."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from runs import GPUBENCH, REPO

# One tiny case; each build process appends what it sees to AB_LOG: its side, side B's variable, the
# variable side B's interpreter (a wrapper) sets, the pid of the process where side B's
# sitecustomize (on B's PYTHONPATH) ran, its own pid and its parent's.
SEEN_BENCH = """
import os
import sys
import time
from dataclasses import dataclass
from typing import ClassVar

from gpubench.harness.measurement.cases import Case
from gpubench.harness.measurement.measure import Timed

gpubench_workload = sys.modules[__name__]


@dataclass(frozen=True)
class SeenCase(Case):
    workload: ClassVar[str] = "matmul"
    size: int


def cases(ctx):
    return [SeenCase(1)]


def set_up(case, ctx):
    seen = [os.environ.get(name, "-") for name in ("AB_SIDE", "AB_X", "AB_VIA", "AB_SITE")]
    with open(os.environ["AB_LOG"], "a") as log:
        log.write(" ".join([*seen, str(os.getpid()), str(os.getppid())]) + "\\n")
    return Timed(fn=lambda: time.sleep(0.0005))


def test_seen(case, gpubench):
    gpubench.run(case)
"""


def session(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], str, list[list[str]]]:
    """A 3-pair session of the one case: side B's interpreter is a wrapper that sets AB_VIA, and B
    has --b-env AB_X=1 and a sitecustomize on its PYTHONPATH. Returns the session's process, its
    output, and each build's line."""
    (tmp_path / "bench_seen.py").write_text(SEEN_BENCH, encoding="utf-8")
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(
        "import os\nos.environ['AB_SITE'] = str(os.getpid())\n"
    )
    wrapper = tmp_path / "python-b"
    wrapper.write_text(f'#!/bin/sh\nexport AB_VIA=wrapper\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    log = tmp_path / "seen.log"
    command = [
        *GPUBENCH,
        "ab",
        "--device",
        "cpu",
        "--profile",
        "smoke",
        "--pairs",
        "3",
        "--results-dir",
        str(tmp_path / "out"),
        "--run-id",
        "s",
        "--a-env",
        "AB_SIDE=A",
        "--b-env",
        "AB_SIDE=B",
        "--b-env",
        "AB_X=1",
        "--b-env",
        f"PYTHONPATH={tmp_path / 'site'}",
        "--b-python",
        str(wrapper),
        *extra,
        str(tmp_path / "bench_seen.py"),
        "-k",
        "test_seen",
    ]
    env = {**os.environ, "AB_LOG": str(log)}
    process = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    output, _ = process.communicate(timeout=600)
    assert process.returncode in (0, 1), output[-4000:]
    return process, output, [line.split() for line in log.read_text().splitlines()]


def by_side(lines: list[list[str]]) -> dict[str, list[list[str]]]:
    return {side: [line for line in lines if line[0] == side] for side in "AB"}


@pytest.mark.process
# two fork servers import torch, six builds: about a minute on a busy 2-core machine
@pytest.mark.timeout(900)
def test_each_sides_builds_are_forked_from_its_own_server_with_its_own_environment(tmp_path):
    process, output, lines = session(tmp_path)
    sides = by_side(lines)
    assert len(sides["A"]) == len(sides["B"]) == 3, lines
    # side B's variable, interpreter, PYTHONPATH: B's alone
    assert all(line[1:4] == ["-", "-", "-"] for line in sides["A"])
    # B's server ran B's interpreter, B's builds its env
    assert all(line[1:3] == ["1", "wrapper"] for line in sides["B"])
    parents = {side: {line[5] for line in rows} for side, rows in sides.items()}
    # one server per side
    assert len(parents["A"]) == len(parents["B"]) == 1 and parents["A"] != parents["B"]
    # B's sitecustomize ran in B's server, before its forks
    assert {line[3] for line in sides["B"]} == parents["B"]
    # forked by the servers, not started by the session
    assert str(process.pid) not in parents["A"] | parents["B"]
    # yet every build is a process of its own
    assert len({line[4] for line in lines}) == 6
    startup = [line for line in output.splitlines() if "build start-up" in line]
    assert (
        len(startup) == 1 and "A " in startup[0] and startup[0].count("s forked (3 builds)") == 2
    ), output[-3000:]
    assert "start as plain processes" not in output


@pytest.mark.process
@pytest.mark.timeout(900)
def test_no_fork_starts_each_build_as_a_fresh_interpreter_of_its_side(tmp_path):
    process, output, lines = session(tmp_path, "--no-fork")
    sides = by_side(lines)
    assert len(sides["A"]) == len(sides["B"]) == 3, lines
    assert all(line[1:3] == ["1", "wrapper"] for line in sides["B"]) and all(
        line[1:4] == ["-", "-", "-"] for line in sides["A"]
    )
    # B's sitecustomize ran in each of B's interpreters
    assert all(line[3] == line[4] for line in sides["B"])
    # no fork server: the session started every build
    assert {line[5] for line in lines} == {str(process.pid)}
    assert output.count("s fresh interpreters (3 builds)") == 2, output[-3000:]


def test_both_sides_servers_are_closed_when_a_build_raises(tmp_path, monkeypatch):
    # the session's loop raises from side A's first build: both sides' launchers (their servers)
    # still end
    from gpubench.harness.commands import ab
    from gpubench.harness.pytest_plugin.forked import ForkLauncher

    closed: list[str] = []

    class Failing(ForkLauncher):
        def run(self, job):
            raise RuntimeError("the fork server did not start the build")

        def close(self) -> None:
            closed.append(self.who)

    monkeypatch.setattr(
        ab,
        "side_launchers",
        lambda sides, limit_s, fork: {s.name: Failing(who=s.name) for s in sides},
    )
    with pytest.raises(RuntimeError):
        ab.run_pairs((ab.AbSide("A"), ab.AbSide("B")), "s", 3, [], REPO, tmp_path)
    assert sorted(closed) == ["A", "B"]
