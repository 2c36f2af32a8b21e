"""`gpubench run` under --budget: the run's one deadline, handed to every build process, and a
launcher that starts a later build process only when it has something to do within the budget
(its start-up alone, an interpreter with torch and a collection, would otherwise overrun it)."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.processes.launch import Completed, Job, Launcher

def run_deadline_s(args: argparse.Namespace) -> float | None:
    """The run's end by the wall clock under a budget (--budget, else the profile's); None without
    one. A bad value is left to the build process, which names it in one line."""
    from harness.catalog.profiles import check_profile
    from harness.core.run_budget import parse_duration

    try:
        budget = getattr(args, "budget", None)
        budget_s = check_profile(args.profile).run_budget_s if budget is None else parse_duration(budget)
    except ValueError:
        return None
    return None if budget_s is None else time.time() + budget_s


def deadline_args(deadline_s: float | None) -> list[str]:
    return [] if deadline_s is None else [f"--gpubench-deadline={deadline_s!r}"]


def first_rows(csv_path: Path) -> list[dict[str, Any]] | None:
    """The first build's rows of the run's file; None when it cannot be read here (the build
    process says why)."""
    from harness.records.results import read_rows

    try:
        return [row for row in read_rows(csv_path) if row["build"] == 0]
    except (OSError, ValueError):
        return None


def cases_left_for(rows: list[dict[str, Any]], build: int) -> bool:
    """Whether a case's build `build` will run: one its first build did not skip, with more
    builds than `build` (a later build skips what the first one skipped)."""
    return any(row["status"] != "skipped" and (row["builds"] or 1) > build for row in rows)


def startup_s(rows: list[dict[str, Any]], launched_s: float | None) -> float:
    """Seconds from launching the first build to its first row: what a later build's start-up
    (an interpreter, torch, the collection) is expected to cost, its first case included."""
    stamps = [datetime.fromisoformat(str(row["timestamp_utc"])).timestamp() for row in rows if row.get("timestamp_utc")]
    return max(0.0, min(stamps) - launched_s) if stamps and launched_s is not None else 0.0


@dataclass
class WithinBudget:
    """A Launcher that starts build 0 always and a later build only before the deadline and when
    a case is left for it (decided once per build, when it is announced or launched)."""

    inner: Launcher
    deadline_s: float
    csv_path: Path
    decided: dict[int, bool] = field(default_factory=dict)
    launched_s: float | None = None  # when the first build was launched (wall clock)

    def starts(self, build: int) -> bool:
        if build not in self.decided:
            self.decided[build] = build == 0 or self._worth_starting(build)
        return self.decided[build]

    def _worth_starting(self, build: int) -> bool:
        rows = first_rows(self.csv_path)
        if rows is None:
            return True
        return time.time() + startup_s(rows, self.launched_s) < self.deadline_s and cases_left_for(rows, build)

    def run(self, job: Job) -> Completed:
        build = job.plan.build if job.plan is not None else 0
        if build == 0:
            self.launched_s = time.time()
        return self.inner.run(job) if self.starts(build) else Completed(0)

    def notes(self) -> list[str]:
        skipped = [str(build + 1) for build, starts in self.decided.items() if not starts]
        if not skipped:
            return []
        return [f"budget: build(s) {', '.join(skipped)} of each case not started (the budget was spent, or every case "
                "was skipped in its first build) — raise --budget for more builds"]
