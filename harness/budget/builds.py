"""Whether `gpubench run` starts another build process within the run's deadline: a later build of
the profile's only with time for its start-up and a case left for it; an extra build only while the
cheapest repeated case's build fits beside its start-up. Decided from the run's rows so far (no
torch, no pytest)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from gpubench.harness.budget.shares import COST_MARGIN

Rows = Sequence[Mapping[str, Any]]


def cases_left_for(rows: Rows, build: int) -> bool:
    """Whether some case will run build `build`: one its first build did not skip, with more builds
    than `build`."""
    return any(row["status"] != "skipped" and (row["builds"] or 1) > build for row in rows)


def first_row_after_s(rows: Rows, launched_s: float | None) -> float:
    """Seconds from launching the first build to its first row: what a later build's start-up (an
    interpreter, torch, the collection) is expected to cost, its first case included."""
    stamps = [
        datetime.fromisoformat(str(row["timestamp_utc"])).timestamp()
        for row in rows
        if row.get("timestamp_utc")
    ]
    return max(0.0, min(stamps) - launched_s) if stamps and launched_s is not None else 0.0


def later_build_starts(
    rows: Rows, build: int, now_s: float, deadline_s: float, start_s: float, last_rows: int | None
) -> bool:
    """A later build of the profile starts when the one before measured something, its start-up ends
    before the deadline and its first build left it a case."""
    first = [row for row in rows if row["build"] == 0]
    if last_rows == 0 and build > 1:
        return False
    return now_s + start_s < deadline_s and cases_left_for(first, build)


def repeated_build_s(rows: Rows) -> list[float]:
    """Build seconds of the measured rows of cases built more than once: what a case costs an extra
    build."""
    return [
        float(row["build_s"])
        for row in rows
        if row["status"] == "ok"
        and (row["builds"] or 1) > 1
        and isinstance(row.get("build_s"), (int, float))
    ]


def extra_build_fits(rows: Rows, now_s: float, deadline_s: float, start_s: float) -> bool:
    """An extra build starts while the cheapest repeated case's build (with its margin) fits beside
    its start-up."""
    costs_s = repeated_build_s(rows)
    return bool(costs_s) and now_s + start_s + min(costs_s) * COST_MARGIN < deadline_s
