"""What each case cost this machine before, for --budget plans: its newest row's build and
first-call seconds, same machine, device and profile (the smoke profile's epoch is 2,048 images).
History is evidence, not a fact: only the user's own files count (a team's store takes anyone's
files), a bounded number of bytes of the newest runs is read, and a row that cannot be true (dated
ahead of this clock, a call of 0 s or of days) is set aside and counted. Unreadable files are passed
over."""

from __future__ import annotations

import math
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpubench.harness.core.bounds import LONGEST_TIMED_S
from gpubench.harness.budget.shares import CaseCost
from gpubench.harness.core.flags import OVER_BUDGET_FLAG, flag_pattern
from gpubench.harness.records.results_reader import read_frame
from gpubench.harness.records.safe_files import mib, not_own

# the newest runs are enough to know a case's cost; a store of years is not read whole
MAX_FILES = 200
# Read before the first case, in the run's own time: 200 MB of old runs took 19 s on a 2-core VM, 16
# MiB about 1.5 s (a long quick run's file is ~1 MiB: the newest dozen runs or more).
MAX_HISTORY_BYTES = 16 * 2**20
# a row this far ahead of this machine's clock was not written by a run that has happened
FUTURE_SKEW_S = 600.0
# A build or call past the longest timed region is damage or a plant, not what a case costs.
AHEAD, NOT_A_DURATION, UNDATED = (
    "dated ahead of this clock",
    "with 0 s, non-finite or 11-day-long seconds",
    "undated",
)


@dataclass
class History:
    """Each case's price from earlier runs, and what was passed over on the way (said once, in the
    plan line)."""

    costs: dict[str, CaseCost] = field(default_factory=dict)
    # why -> rows of this machine that are not evidence
    set_aside: Counter[str] = field(default_factory=Counter)
    # files owned by another user, or writable by others
    not_yours: int = 0
    # older runs past MAX_HISTORY_BYTES, left unread
    unread_bytes: int = 0

    def note(self) -> str | None:
        """'history: 2 rows set aside (1 dated ahead of this clock, ...); 1 file not yours passed
        over', or None."""
        parts = []
        if self.set_aside:
            rows = sum(self.set_aside.values())
            why = ", ".join(f"{count} {reason}" for reason, count in sorted(self.set_aside.items()))
            parts.append(f"{rows} row{'s' * (rows != 1)} set aside ({why})")
        if self.not_yours:
            parts.append(
                f"{self.not_yours} file{'s' * (self.not_yours != 1)} not yours passed over"
            )
        if self.unread_bytes:
            parts.append(f"runs older than the newest {mib(MAX_HISTORY_BYTES)} not read")
        return "history: " + ", ".join(parts) if parts else None


def _number(value: Any) -> float | None:
    return (
        float(value)
        if value is not None and isinstance(value, (int, float)) and math.isfinite(value)
        else None
    )


def history_files(folder: Path) -> tuple[list[Path], int, int]:
    """(the user's own run files, newest first by mtime, up to MAX_FILES and MAX_HISTORY_BYTES;
    files not the user's; bytes left unread). Ownership is the store's one rule
    (safe_files.not_own), checked before any byte is read."""
    owned, not_yours = [], 0
    try:
        candidates = list(folder.glob("*.csv"))
    except OSError:
        return [], 0, 0
    for path in candidates:
        try:
            status = os.lstat(path)
        except OSError:
            continue
        if not_own(path, status) is not None:
            not_yours += 1
        else:
            owned.append((status.st_mtime, status.st_size, path))
    owned.sort(reverse=True)
    chosen, total_bytes = [], 0
    for _, size_bytes, path in owned[:MAX_FILES]:
        # one huge run does not hide the older ones
        if total_bytes + size_bytes > MAX_HISTORY_BYTES:
            continue
        chosen.append(path)
        total_bytes += size_bytes
    return chosen, not_yours, sum(size for _, size, _ in owned) - total_bytes


def history(
    folder: Path, machine_id: str, device: str, profile: str, now_s: float | None = None
) -> History:
    """This machine's earlier runs in `folder` (its store folder or the results folder), read once
    per run."""
    paths, not_yours, unread_bytes = history_files(folder)
    found = case_costs(paths, machine_id, device, profile, now_s, from_history=True)
    found.not_yours, found.unread_bytes = not_yours, unread_bytes
    return found


def case_costs(
    paths: list[Path],
    machine_id: str,
    device: str,
    profile: str,
    now_s: float | None = None,
    from_history: bool = True,
) -> History:
    """case_id -> CaseCost from each case's newest possible row with a build_s, by parsed time;
    `from_history`: earlier runs (a price that orders and caps, never a skip before the case's own
    call), else this run's file."""
    now_s = time.time() if now_s is None else now_s
    found = History()
    newest: dict[str, tuple[float, CaseCost]] = {}
    for path in paths:
        try:
            frame = read_frame(path)
        # damaged, a newer schema, unreadable: no history from it
        except (OSError, ValueError):
            continue
        if "build_s" not in frame.columns:
            continue
        for case_id, stamp_s, build_s, call_s in _evidence(
            frame, machine_id, device, profile, now_s, found.set_aside
        ):
            cost = CaseCost(build_s, call_s, history=from_history)
            if case_id not in newest or newest[case_id][0] <= stamp_s:
                newest[case_id] = (stamp_s, cost)
    found.costs = {case_id: cost for case_id, (_, cost) in newest.items()}
    return found


def _evidence(
    frame: Any, machine_id: str, device: str, profile: str, now_s: float, set_aside: Counter[str]
) -> list[tuple[str, float, float, float | None]]:
    """(case id, its time in epoch seconds, build s, first call s) of this machine's possible rows;
    the others counted by why."""
    import pandas as pd

    # a case skipped for the budget before its first call says nothing of what it costs
    flags = (
        frame["flags"].fillna("").astype(str)
        if "flags" in frame.columns
        else pd.Series("", index=frame.index)
    )
    over_budget = flags.str.contains(flag_pattern(OVER_BUDGET_FLAG), regex=True)
    unmeasured = over_budget & frame["first_call_s"].isna()
    same_profile = frame["profile"].astype(str) == profile if "profile" in frame.columns else False
    mine = frame[
        (frame["machine_id"] == machine_id)
        & (frame["device"] == device)
        & same_profile
        & frame["build_s"].notna()
        & ~unmeasured
    ]
    stamps = pd.to_datetime(mine["timestamp_utc"], utc=True, format="ISO8601", errors="coerce")
    # NaT: NaN
    stamps_s = (stamps - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
    build_s, call_s = mine["build_s"].astype(float), mine["first_call_s"].astype(float)
    # NaN and inf fail both
    possible_build = (build_s > 0) & (build_s < LONGEST_TIMED_S)
    possible_call = call_s.isna() | ((call_s > 0) & (call_s < LONGEST_TIMED_S))
    verdicts = {
        UNDATED: stamps_s.isna(),
        AHEAD: stamps_s > now_s + FUTURE_SKEW_S,
        NOT_A_DURATION: ~(possible_build & possible_call),
    }
    refused = pd.Series(False, index=mine.index)
    # each row counted once, under its first reason
    for reason, broken in verdicts.items():
        if count := int((broken & ~refused).sum()):
            set_aside[reason] += count
        refused |= broken
    kept = mine[~refused]
    return [
        (str(case_id), float(stamps_s[index]), float(build), _number(call))
        for index, case_id, build, call in zip(
            kept.index, kept["case_id"], kept["build_s"], kept["first_call_s"]
        )
    ]
