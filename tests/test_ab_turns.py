"""A `gpubench ab` pair whose two builds run at once and take turns case by case
(gpubench.harness.processes.turns): never two cases at once, each case's A and B back to back, each
side first as often as second, and a build whose partner ended runs alone instead of waiting for
it."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from runs import GPUBENCH, REPO

from gpubench.harness.processes.turns import PairPipes, Turns, gives_after, takes_before


def run_side(
    pipes: PairPipes,
    side: str,
    first: bool,
    cases: int,
    log: list[tuple[str, int, str]],
    lock: threading.Lock,
) -> None:
    turns = Turns(pipes.plan(side, first)).open()
    turns.ready()
    for case in range(cases):
        turns.before(case)
        with lock:
            log.append((side, case, "start"))
        # another side's case starting now would land between this start and end
        time.sleep(0.002)
        with lock:
            log.append((side, case, "end"))
        turns.after(case)
    turns.finish()


def take_turns(tmp_path: Path, cases: dict[str, int]) -> list[tuple[str, int, str]]:
    pipes = PairPipes(str(tmp_path), 0, ("F", "S")).open()
    log: list[tuple[str, int, str]] = []
    lock = threading.Lock()
    threads = [
        threading.Thread(target=run_side, args=(pipes, side, side == "F", count, log, lock))
        for side, count in cases.items()
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert not any(thread.is_alive() for thread in threads), f"a side still waits: {log}"
    pipes.close()
    return log


def cases_in_order(log: list[tuple[str, int, str]]) -> list[tuple[str, int]]:
    """Each case as it ran; fails if a case started while another was running."""
    ran = []
    for index in range(0, len(log), 2):
        (side, case, start), (side_end, case_end, end) = log[index], log[index + 1]
        assert (start, end) == ("start", "end") and (side, case) == (side_end, case_end), (
            f"two cases at once: {log}"
        )
        ran.append((side, case))
    return ran


def test_the_schedule_alternates_who_goes_first_case_by_case():
    firsts = [("F" if takes_before(False, case) else "S") for case in range(6)]
    # S waits before its even cases: F went first on those
    assert firsts == ["F", "S", "F", "S", "F", "S"]
    assert [gives_after(True, case) for case in range(4)] == [True, False, True, False]


def test_two_sides_take_turns_one_case_at_a_time_each_first_as_often_as_second(tmp_path):
    ran = cases_in_order(take_turns(tmp_path, {"F": 4, "S": 4}))
    assert ran == [("F", 0), ("S", 0), ("S", 1), ("F", 1), ("F", 2), ("S", 2), ("S", 3), ("F", 3)]


def test_a_side_with_more_cases_runs_its_rest_alone_once_its_partner_is_done(tmp_path):
    ran = cases_in_order(take_turns(tmp_path, {"F": 2, "S": 5}))
    assert ran == [("F", 0), ("S", 0), ("S", 1), ("F", 1), ("S", 2), ("S", 3), ("S", 4)]


def test_a_build_whose_partner_ended_runs_alone_when_the_session_frees_it(tmp_path):
    # S never came (its process died before its collection): the session writes "free" into F's pipe
    pipes = PairPipes(str(tmp_path), 0, ("F", "S")).open()
    log: list[tuple[str, int, str]] = []
    lone = threading.Thread(target=run_side, args=(pipes, "F", True, 3, log, threading.Lock()))
    lone.start()
    time.sleep(0.05)
    # waiting for its partner's collection
    assert log == []
    pipes.free("F")
    lone.join(10)
    assert not lone.is_alive() and cases_in_order(log) == [("F", 0), ("F", 1), ("F", 2)]
    pipes.close()
    assert os.listdir(tmp_path) == []


# Two tiny cases; each build appends its side, pid, the case, and the wall clock (ns) when the
# case's build began and when its test ended to AB_LOG.
TURNS_BENCH = """
import os
import sys
import time
from dataclasses import dataclass
from typing import ClassVar

from gpubench.harness.measurement.cases import Case
from gpubench.harness.measurement.measure import Timed

gpubench_workload = sys.modules[__name__]
STARTED = {}


@dataclass(frozen=True)
class TurnCase(Case):
    workload: ClassVar[str] = "matmul"
    size: int


def cases(ctx):
    return [TurnCase(1), TurnCase(2)]


def set_up(case, ctx):
    STARTED[case.size] = time.time_ns()
    return Timed(fn=lambda: time.sleep(0.0005))


def test_turn(case, gpubench):
    gpubench.run(case)
    with open(os.environ["AB_LOG"], "a") as log:
        side, started = os.environ['AB_SIDE'], STARTED[case.size]
        log.write(f"{side} {os.getpid()} {case.size} {started} {time.time_ns()}\\n")
"""


@pytest.mark.process
# two fork servers import torch, six builds: about a minute on a busy 2-core machine
@pytest.mark.timeout(900)
def test_a_sessions_later_pairs_take_turns_case_by_case(tmp_path):
    (tmp_path / "bench_turns.py").write_text(TURNS_BENCH, encoding="utf-8")
    log = tmp_path / "turns.log"
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
        str(tmp_path / "bench_turns.py"),
        "-k",
        "test_turn",
    ]
    done = subprocess.run(
        command,
        cwd=REPO,
        env={**os.environ, "AB_LOG": str(log)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode in (0, 1), (done.stdout + done.stderr)[-4000:]
    rows = [line.split() for line in log.read_text().splitlines()]
    builds: dict[str, list[tuple[int, int, str, int]]] = {}
    for side, pid, size, start, end in rows:
        builds.setdefault(pid, []).append((int(start), int(end), side, int(size)))
    assert len(builds) == 6 and all(len(cases) == 2 for cases in builds.values()), rows
    by_start = sorted(builds.values(), key=lambda cases: min(case[0] for case in cases))
    pairs = [sorted(by_start[index] + by_start[index + 1]) for index in (0, 2, 4)]
    assert [case[2:] for case in pairs[0]] in (
        [("A", 1), ("A", 2), ("B", 1), ("B", 2)],
        # the first pair: one build, then the other
        [("B", 1), ("B", 2), ("A", 1), ("A", 2)],
    )
    for cases in pairs[1:]:
        # never two cases at once
        assert all(before[1] <= after[0] for before, after in zip(cases, cases[1:])), cases
        first, second = cases[0][2], cases[1][2]
        assert first != second and [case[2:] for case in cases] == [
            (first, 1),
            (second, 1),
            (second, 2),
            (first, 2),
        ]
    # each side went first in one pair
    assert {pairs[1][0][2], pairs[2][0][2]} == {"A", "B"}
