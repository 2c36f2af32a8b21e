"""What each case cost this machine before, for --budget plans: its latest row's build and first-call seconds, same
machine, device and profile (the smoke profile's epoch is 2,048 images). History is a hint: unreadable files are
passed over."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from gpubench.harness.core.run_budget import CaseCost
from gpubench.harness.records.results_reader import read_frame

OVER_BUDGET = "over budget"  # how a budget's skipped rows begin (core.run_budget)
MAX_FILES = 200  # the newest runs are enough to know a case's cost; a store of years is not read whole


def _number(value: Any) -> float | None:
    return float(value) if value is not None and isinstance(value, (int, float)) and math.isfinite(value) else None


def case_costs(results_dir: Path, machine_id: str, device: str, profile: str) -> dict[str, CaseCost]:
    """case_id -> CaseCost from each case's newest row with a build_s."""
    try:
        paths = sorted(results_dir.glob("*.csv"), key=lambda path: path.stat().st_mtime)[-MAX_FILES:]
    except OSError:
        return {}
    costs: dict[str, tuple[str, CaseCost]] = {}
    for path in paths:
        try:
            frame = read_frame(path)
        except (OSError, ValueError):  # damaged, a newer schema, unreadable: no history from it
            continue
        if "build_s" not in frame.columns:
            continue
        # a case skipped for the budget before its first call says nothing of what it costs
        unmeasured = frame["reason"].fillna("").str.startswith(OVER_BUDGET) & frame["first_call_s"].isna()
        same_profile = frame["profile"].astype(str) == profile if "profile" in frame.columns else False
        mine = frame[(frame["machine_id"] == machine_id) & (frame["device"] == device) & same_profile
                     & frame["build_s"].notna() & ~unmeasured]
        for row in mine[["case_id", "timestamp_utc", "build_s", "first_call_s"]].itertuples(index=False):
            cost = CaseCost(float(row.build_s), _number(row.first_call_s))
            stamp = str(row.timestamp_utc)
            if row.case_id not in costs or costs[row.case_id][0] <= stamp:
                costs[row.case_id] = (stamp, cost)
    return {case_id: cost for case_id, (_, cost) in costs.items()}
