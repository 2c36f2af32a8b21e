"""`gpubench run` under --budget: a launcher that starts a later build process only when it has
something to do within the budget (its start-up alone, an interpreter with torch and a collection,
would otherwise overrun it), and the extra builds after the profile's. What decides is
gpubench.harness.budget.builds; here are the launchers."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpubench.harness.budget.builds import extra_build_fits, first_row_after_s, later_build_starts
from gpubench.harness.core.duration_text import format_duration
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


@dataclass
class WithinBudget:
    """A Launcher that starts build 0 always, and a later build only before the deadline and when a
    case is left for it (decided once per build, when it is announced or launched)."""

    inner: Launcher
    deadline_s: float
    csv_path: Path
    decided: dict[int, bool] = field(default_factory=dict)
    # when the first build was launched (wall clock)
    launched_s: float | None = None
    # a build's start as a build measured it (BuildAnswer.startup_s)
    build_start_s: float | None = None
    # rows the last build wrote (None: its answer never came)
    last_rows: int | None = None

    def starts(self, build: int) -> bool:
        if build not in self.decided:
            self.decided[build] = build == 0 or self._worth_starting(build)
        return self.decided[build]

    def _worth_starting(self, build: int) -> bool:
        rows = run_rows(self.csv_path)
        if rows is None:
            return True
        first = [row for row in rows if row["build"] == 0]
        start_s = (
            self.build_start_s
            if self.build_start_s is not None
            else first_row_after_s(first, self.launched_s)
        )
        return later_build_starts(
            rows, build, time.time(), self.deadline_s, start_s, self.last_rows
        )

    def run(self, job: Job) -> Completed:
        build = job.plan.build if job.plan is not None else 0
        if build == 0:
            self.launched_s = time.time()
        # an extra: ExtraBuilds decided it
        if not ((job.plan is not None and job.plan.extra) or self.starts(build)):
            return Completed(0)
        done = self.inner.run(job)
        self.last_rows = done.answer.rows_written if done.answer is not None else None
        if done.answer is not None and done.answer.startup_s is not None:
            # the first row's time also counts a fork server's start
            self.build_start_s = done.answer.startup_s
        return done

    def notes(self) -> list[str]:
        skipped = [str(build + 1) for build, starts in self.decided.items() if not starts]
        return (
            [
                f"budget: build(s) {', '.join(skipped)} of each case not started (the budget was "
                "spent, or every case was skipped in its first build) — raise --budget for more "
                "builds"
            ]
            if skipped
            else []
        )


@dataclass
class ExtraBuilds:
    """After the profile's builds, one more build process while the budget has time for the cheapest
    repeated case's build (with its margin) and the process's start, and the last extra build
    measured something (gpubench.harness.pytest_plugin.extra_build): each narrows the spread its
    noisiest cases are judged with."""

    deadline_s: float
    csv_path: Path
    first_extra: int | None = None

    def __call__(self, build: int, answers: list[BuildAnswer]) -> bool:
        if build >= MAX_BUILDS:
            return False
        if self.first_extra is None:
            self.first_extra = build
        elif not answers or answers[-1].build != build - 1 or answers[-1].rows_written == 0:
            # the last extra build found nothing that fit
            return False
        # a build's start, as builds measured it
        start_s = max((answer.startup_s or 0.0 for answer in answers), default=0.0)
        return extra_build_fits(
            run_rows(self.csv_path) or [], time.time(), self.deadline_s, start_s
        )

    def announce(self, build: int) -> str:
        left = format_duration(max(0.0, self.deadline_s - time.time()))
        return (
            f"gpubench: extra build {build + 1}, with {left} of the budget left: the repeated "
            "cases whose builds disagree most, each whose build still fits"
        )
