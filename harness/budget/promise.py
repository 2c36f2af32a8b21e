"""The run's last word on its plan: the headline cases the plan promised against what the run's rows
hold, each difference with its measured cause."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gpubench.harness.core.flags import IMPOSSIBLE, OVER_BUDGET_FLAG, has_flag

# A console line a person reads whole: a longer cause is cut at a word, and says so.
LINE_CHARS = 200


def shortened(text: str, limit: int) -> str:
    """`text` within `limit` characters, cut at a word's end with an ellipsis, never mid-word."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0].rstrip(" ,;:—-")
    return cut + "…"


def first_builds(rows: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Each case's first-build row (a file of one build per case reads as build 0)."""
    found: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        if int(row.get("build") or 0) == 0:
            found.setdefault(str(row.get("case_id")), row)
    return found


def shortfall(case_id: str, row: Mapping[str, Any] | None) -> str | None:
    """Why a promised case gave no summary figure (None: it did), from its row."""
    if row is None:
        return f"{case_id}: no row (its build ended before it was recorded)"
    if row.get("status") != "ok":
        return f"{case_id}: {row.get('status')} — {row.get('reason') or 'no reason recorded'}"
    if has_flag(row.get("flags"), IMPOSSIBLE):
        return (
            f"{case_id}: measured, flagged impossible and kept out of the summary — "
            f"{row.get('reason')}"
        )
    return None


def cannot_run_here(row: Mapping[str, Any] | None) -> bool:
    """A case skipped for a reason of its own (the device cannot run its setting), not for the
    budget: no promise of the plan's, which cannot know it before the case is built."""
    return (
        row is not None
        and row.get("status") == "skipped"
        and not has_flag(row.get("flags"), OVER_BUDGET_FLAG)
    )


def delivery_lines(
    promised: list[str], left_out: list[str], rows: Iterable[Mapping[str, Any]]
) -> list[str]:
    """'headline: 17 promised, 17 delivered' — or the count and one line per case that was not, with
    its cause; a case the plan left out that has a measured row anyway is named as the plan's broken
    word."""
    if not promised and not left_out:
        return []
    built = first_builds(rows)
    unable = [case_id for case_id in promised if cannot_run_here(built.get(case_id))]
    promised = [case_id for case_id in promised if case_id not in unable]
    missing = [
        line for case_id in promised if (line := shortfall(case_id, built.get(case_id))) is not None
    ]
    ran_anyway = [case_id for case_id in left_out if built.get(case_id, {}).get("status") == "ok"]
    head = f"gpubench: headline: {len(promised)} promised, {len(promised) - len(missing)} delivered"
    if left_out:
        head += f"; {len(left_out)} left out by the plan, as its first line said"
    if unable:
        head += (
            f"; {len(unable)} this device cannot run "
            f"({', '.join(unable[:3])}{' …' if len(unable) > 3 else ''})"
        )
    lines = [shortened(head, LINE_CHARS) + (":" if missing else "")]
    lines += [shortened(f"  {line}", LINE_CHARS) for line in missing]
    if ran_anyway:
        lines.append(
            f"gpubench: error: the plan left out {', '.join(ran_anyway)} and it ran anyway"
        )
    return lines
