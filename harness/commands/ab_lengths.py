"""How long each undecided case's builds are in a sequential session (`gpubench ab --budget`): from the part of
its noise its builds' own samples explain and what a build costs outside its timed rounds. Chosen once per case,
at its first look with MIN_PAIRS pairs, and kept: the pairs after it have one spread."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from gpubench.harness.core.plan import BuildNoise, MEDIAN_VAR_FACTOR, best_build_s
from gpubench.reports.paired import pair_logs
from gpubench.reports.sequential import MIN_PAIRS

IQR_PER_SD = 1.349  # interquartile range of a normal spread, in standard deviations
MOST_BUILD_S = 2.0  # a case's build never times more than this: a pair stays short enough to look often
BUDGET_SHARE = 0.01  # ... nor more than this share of the session's budget


def case_noise(a: pd.DataFrame, b: pd.DataFrame, case_id: str, logs: pd.Series) -> BuildNoise | None:
    """What the case's ok builds on both sides showed; None with too few pairs or rows without a spread."""
    if len(logs) < MIN_PAIRS:
        return None
    rows = pd.concat([a[a["case_id"] == case_id], b[b["case_id"] == case_id]])
    rows = rows[(rows["status"] == "ok") & (rows["rounds"] >= 2) & (rows["round_s"] > 0)]
    if rows.empty or rows[["rel_iqr", "round_s", "build_s"]].isna().any().any():
        return None
    round_var = (rows["rel_iqr"].to_numpy(float) / IQR_PER_SD) ** 2
    own_var = float(np.median(MEDIAN_VAR_FACTOR * round_var / rows["rounds"].to_numpy(float)))
    timed_s = rows["rounds"].to_numpy(float) * rows["round_s"].to_numpy(float)
    between_var = max(float(np.var(logs.to_numpy(float), ddof=1)) / 2 - own_var, 0.0)  # a pair: two builds
    overhead_s = float(np.median(np.maximum(rows["build_s"].to_numpy(float) - timed_s, 0.0)))
    return BuildNoise(between_var, float(np.median(round_var)), float(rows["round_s"].median()), overhead_s)


def choose_lengths(a: pd.DataFrame, b: pd.DataFrame, cases: list[str], chosen: dict[str, float],
                   least_s: float, budget_s: float) -> dict[str, float]:
    """Timed seconds per build for each of `cases` that has none in `chosen` yet and can be told."""
    most_s = max(least_s, min(MOST_BUILD_S, BUDGET_SHARE * budget_s))
    logs = pair_logs(a, b)
    new = {}
    for case_id in cases:
        if case_id in chosen or case_id not in logs:
            continue
        noise = case_noise(a, b, case_id, logs[case_id])
        if noise is not None:
            new[case_id] = round(best_build_s(noise, least_s, most_s), 3)
    return new


def lengths_line(new: dict[str, float], least_s: float) -> str | None:
    """The cases given longer builds than the session's, for the progress line; None when none."""
    longer = {case: s for case, s in new.items() if s > least_s and not math.isclose(s, least_s)}
    shown = ", ".join(f"{case} {s:.2g} s" for case, s in sorted(longer.items())[:4])
    more = f" and {len(longer) - 4} more" if len(longer) > 4 else ""
    return f"longer builds where a build's own samples are most of the noise: {shown}{more}" if longer else None
