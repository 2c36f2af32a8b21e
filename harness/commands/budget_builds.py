"""`gpubench run` under --budget: the run's one deadline, handed to every build process, and a
launcher that starts a later build process only when it has something to do within the budget
(its start-up alone, an interpreter with torch and a collection, would otherwise overrun it)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from gpubench.harness.core.run_budget import COST_MARGIN, format_duration
from gpubench.harness.core.options import MAX_BUILDS
from gpubench.harness.processes.launch import Completed, Job, Launcher
from gpubench.harness.processes.protocol import BuildAnswer


def run_rows(csv_path: Path) -> list[dict[str, Any]] | None:
    """The run's rows so far; None when unreadable here (the build process says why)."""
    from gpubench.harness.records.results_reader import read_rows

    try:
        return read_rows(csv_path)
    except (OSError, ValueError):
        return None


def cases_left_for(rows: list[dict[str, Any]], build: int) -> bool:
    """Whether some case will run build `build`: one its first build did not skip, with more builds than `build`."""
    return any(row["status"] != "skipped" and (row["builds"] or 1) > build for row in rows)


def startup_s(rows: list[dict[str, Any]], launched_s: float | None) -> float:
    """Seconds from launching the first build to its first row: what a later build's start-up (an interpreter,
    torch, the collection) is expected to cost, its first case included."""
    stamps = [datetime.fromisoformat(str(row["timestamp_utc"])).timestamp()
              for row in rows if row.get("timestamp_utc")]
    return max(0.0, min(stamps) - launched_s) if stamps and launched_s is not None else 0.0


@dataclass
class WithinBudget:
    """A Launcher that starts build 0 always, and a later build only before the deadline and when a case is left
    for it (decided once per build, when it is announced or launched)."""

    inner: Launcher
    deadline_s: float
    csv_path: Path
    decided: dict[int, bool] = field(default_factory=dict)
    launched_s: float | None = None  # when the first build was launched (wall clock)
    build_start_s: float | None = None  # a build's start as a build measured it (BuildAnswer.startup_s)
    last_rows: int | None = None  # rows the last build wrote (None: its answer never came)

    def starts(self, build: int) -> bool:
        if build not in self.decided:
            self.decided[build] = build == 0 or self._worth_starting(build)
        return self.decided[build]

    def _worth_starting(self, build: int) -> bool:
        rows = run_rows(self.csv_path)
        if rows is None:
            return True
        rows = [row for row in rows if row["build"] == 0]  # the first build's: what later builds may repeat
        start_s = self.build_start_s if self.build_start_s is not None else startup_s(rows, self.launched_s)
        if self.last_rows == 0 and build > 1:  # the build before measured nothing: the time left fits no case either
            return False
        return time.time() + start_s < self.deadline_s and cases_left_for(rows, build)

    def run(self, job: Job) -> Completed:
        build = job.plan.build if job.plan is not None else 0
        if build == 0:
            self.launched_s = time.time()
        if not ((job.plan is not None and job.plan.extra) or self.starts(build)):  # an extra: ExtraBuilds decided it
            return Completed(0)
        done = self.inner.run(job)
        self.last_rows = done.answer.rows_written if done.answer is not None else None
        if done.answer is not None and done.answer.startup_s is not None:
            self.build_start_s = done.answer.startup_s  # the first row's time also counts a fork server's start
        return done

    def notes(self) -> list[str]:
        skipped = [str(build + 1) for build, starts in self.decided.items() if not starts]
        return [f"budget: build(s) {', '.join(skipped)} of each case not started (the budget was spent, or every case "
                "was skipped in its first build) — raise --budget for more builds"] if skipped else []


def repeated_build_s(rows: list[dict[str, Any]]) -> list[float]:
    """Build seconds of the measured rows of cases built more than once: what a case costs an extra build."""
    return [float(row["build_s"]) for row in rows
            if row["status"] == "ok" and (row["builds"] or 1) > 1 and isinstance(row.get("build_s"), (int, float))]


@dataclass
class ExtraBuilds:
    """After the profile's builds, one more build process while the budget has time for the cheapest repeated
    case's build (with its margin) and the process's start, and the last extra build measured something
    (gpubench.harness.pytest_plugin.extra_build): each narrows the spread its noisiest cases are judged with."""

    deadline_s: float
    csv_path: Path
    first_extra: int | None = None

    def __call__(self, build: int, answers: list[BuildAnswer]) -> bool:
        if build >= MAX_BUILDS:
            return False
        if self.first_extra is None:
            self.first_extra = build
        elif not answers or answers[-1].build != build - 1 or answers[-1].rows_written == 0:
            return False  # the last extra build found nothing that fit
        costs_s = repeated_build_s(run_rows(self.csv_path) or [])
        if not costs_s:
            return False
        start_s = max((answer.startup_s or 0.0 for answer in answers), default=0.0)  # a build's start, measured
        return time.time() + start_s + min(costs_s) * COST_MARGIN < self.deadline_s

    def announce(self, build: int) -> str:
        left = format_duration(max(0.0, self.deadline_s - time.time()))
        return (f"gpubench: extra build {build + 1}, with {left} of the budget left: the repeated cases whose builds "
                "disagree most, each whose build still fits")
