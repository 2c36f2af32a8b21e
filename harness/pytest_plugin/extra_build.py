"""Which builds of a case a build process collects, and the extra build `gpubench run` starts past
the profile's when the budget has time left: it repeats cases the profile builds more than once,
most uncertain first, each only if its whole build (as timed so far) fits the time left; one that
does not is passed over with no row. Torch-free."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable
from typing import Any

import pytest

EXTRA_BUILD_SKIP = "extra build: its build does not fit the budget's time left"


def builds_to_collect(builds: int, only_build: int | None, extra: bool) -> list[int]:
    """The build numbers of a case this process collects: a process that runs one build collects
    that one only (100 pairs would otherwise collect 100 items per case in every build); a case
    without it gets build 0, deselected later (an empty parameter set would show as a skipped test);
    an extra build collects its number."""
    if only_build is None:
        return list(range(builds))
    if only_build < builds or (extra and builds > 1):
        return [only_build]
    return [0]


def build_spread(medians_s: list[float]) -> float:
    """(max - min) / median of a case's build medians; inf for one build (nothing says how uncertain
    it is)."""
    if len(medians_s) < 2:
        return math.inf
    middle_s = statistics.median(medians_s)
    return (max(medians_s) - min(medians_s)) / middle_s if middle_s > 0 else math.inf


def noisiest_first(rows: Iterable[dict[str, Any]]) -> list[str]:
    """The cases an extra build repeats: built more than once by the profile, every build so far
    measured (a skipped, failed or out-of-memory one is not repeated), widest spread first (ties:
    run order)."""
    medians_s: dict[str, list[float]] = {}
    unmeasured: set[str] = set()
    for row in rows:
        case_id = str(row["case_id"])
        if (row.get("builds") or 1) < 2:
            continue
        median_s = row.get("median_s")
        if row.get("status") != "ok" or not isinstance(median_s, (int, float)) or not median_s > 0:
            unmeasured.add(case_id)
            continue
        medians_s.setdefault(case_id, []).append(float(median_s))
    ranked = [case_id for case_id in medians_s if case_id not in unmeasured]
    return sorted(ranked, key=lambda case_id: -build_spread(medians_s[case_id]))


def params_of(item: pytest.Item) -> dict[str, Any]:
    """The item's parameters (`case`, `gpubench_build`); none for a test nothing parametrized."""
    return getattr(getattr(item, "callspec", None), "params", {})


def case_id_of(item: pytest.Item) -> str | None:
    return getattr(params_of(item).get("case"), "case_id", None)


def build_of(item: pytest.Item) -> int:
    return int(params_of(item).get("gpubench_build", 0))


def deselect(
    config: pytest.Config, items: list[pytest.Item], keep: Callable[[pytest.Item], bool]
) -> None:
    """The items not kept leave the selection, told to pytest as deselected (its summary counts
    them)."""
    dropped = [item for item in items if not keep(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if keep(item)]


def keep_in_order(config: pytest.Config, items: list[pytest.Item], order: list[str]) -> None:
    rank = {case_id: index for index, case_id in enumerate(order)}
    deselect(config, items, lambda item: case_id_of(item) in rank)
    items.sort(key=lambda item: rank[case_id_of(item) or ""])


def selected_builds(case_builds: dict[str, int], item: pytest.Item) -> int:
    """The builds a selected item's case has, though this process collected only one of them."""
    known = case_builds.get(case_id_of(item) or "")
    return known if known is not None else build_of(item) + 1
