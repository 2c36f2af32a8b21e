"""Intervals on cross-machine speedups (geomeans over cases of baseline/machine medians), and
headline figures noise cannot win. Per case: the variance of each machine's mean log build median
plus the run-to-run noise `compare` assumes (ONE_PROCESS_FLOOR for a case built once per run, whose
builds cannot show it); over n cases se = sqrt(sum se²)/n, and the interval is the point estimate
times exp(± z·se)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpubench.reports.judge.aggregate import geomean
from gpubench.reports.judge.verdicts import NOISE_FLOOR, ONE_PROCESS_FLOOR

Z95 = 1.96


@dataclass(frozen=True)
class RatioInterval:
    geomean: float
    low: float
    high: float
    cases: int
    single_build_cases: int

    def text(self) -> str:
        single = f", {self.single_build_cases} built once" if self.single_build_cases else ""
        return (
            f"{self.geomean:.3g}x (95% {self.low:.3g}–{self.high:.3g}, geomean of {self.cases} "
            f"cases{single})"
        )


def _log_stats(frame: pd.DataFrame, machine: str, workload: str | None) -> pd.DataFrame:
    mask = (frame["machine"] == machine) & (frame["status"] == "ok") & (frame["median_s"] > 0)
    if workload is not None:
        mask &= frame["workload"] == workload
    # three columns: a store's frame has a hundred and more
    ok = frame.loc[mask, ["case_id", "median_s", "run_id"]]
    logs = np.log(ok["median_s"]).groupby(ok["case_id"])
    builds, runs = logs.count(), ok.groupby("case_id")["run_id"].nunique()
    floor = np.where(builds > runs, NOISE_FLOOR, ONE_PROCESS_FLOOR) ** 2 / runs
    return pd.DataFrame(
        {
            "median": ok.groupby("case_id")["median_s"].median(),
            "var_of_mean": (logs.var(ddof=1) / builds).fillna(0) + floor,
            "n": builds,
        }
    )


def speedup_interval(
    frame: pd.DataFrame, baseline: str, machine: str, workload: str | None = None
) -> RatioInterval | None:
    """Geomean of baseline/machine over the cases both ran (of `workload` when given)."""
    base, mine = _log_stats(frame, baseline, workload), _log_stats(frame, machine, workload)
    both = base.add_suffix("_base").join(mine.add_suffix("_mine"), how="inner")
    if both.empty:
        return None
    logs = np.log(both["median_base"] / both["median_mine"])
    variance = (both["var_of_mean_base"] + both["var_of_mean_mine"]).sum() / len(both) ** 2
    single = int(((both["n_base"] < 2) | (both["n_mine"] < 2)).sum())
    point, half = float(np.exp(logs.mean())), Z95 * math.sqrt(variance)
    return RatioInterval(point, point * math.exp(-half), point * math.exp(half), len(both), single)


def run_interval(values: pd.Series, run_ids: pd.Series) -> tuple[float, float] | None:
    """Where another run of the same case on this machine would read a figure, 95%: around the
    median of its builds, the variance of their mean (log scale) plus the run-to-run noise of
    identical runs, NOISE_FLOOR for a case built several times per run, ONE_PROCESS_FLOOR for one
    built once per run (its builds cannot show that noise). None without a positive figure."""
    keep = values.notna() & (values > 0) & np.isfinite(values.astype(float))
    values, run_ids = values[keep].astype(float), run_ids[keep]
    if values.empty:
        return None
    builds, runs = len(values), max(run_ids.nunique(), 1)
    floor = NOISE_FLOOR if builds > runs else ONE_PROCESS_FLOOR
    logs = np.log(values.to_numpy())
    between = float(np.var(logs, ddof=1)) / builds if builds > 1 else 0.0
    half = Z95 * math.sqrt(between + floor**2 / runs)
    center = float(np.median(values))
    return center * math.exp(-half), center * math.exp(half)


TIMING_COLUMNS = ["machine", "workload", "status", "case_id", "median_s", "run_id"]


def timings_by_machine(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The rows speedup_interval reads, per machine: a store's frame (200,000 rows for a thousand
    runs) is compared once, not once per machine and workload."""
    rows = frame.loc[(frame["status"] == "ok") & (frame["median_s"] > 0), TIMING_COLUMNS]
    return {str(machine): group for machine, group in rows.groupby("machine", sort=False)}


def pair_timings(timings: dict[str, pd.DataFrame], baseline: str, machine: str) -> pd.DataFrame:
    """The baseline's and the machine's rows of timings_by_machine."""
    parts = [timings[m] for m in dict.fromkeys((baseline, machine)) if m in timings]
    return pd.concat(parts) if parts else pd.DataFrame(columns=TIMING_COLUMNS)


def steady_key(cases: pd.DataFrame, figure: str) -> str:
    """The column steady_best ranks by: the lower quartile of `figure` over builds where
    aggregated."""
    return f"{figure}_q1" if f"{figure}_q1" in cases else figure


def steady_best(cases: pd.DataFrame, figure: str) -> pd.Series | None:
    """The case with the highest lower quartile of `figure` over its builds: one lucky build of a
    noisy size cannot win the headline."""
    column = steady_key(cases, figure)
    rows = cases.dropna(subset=[column])
    return rows.loc[rows[column].idxmax()] if not rows.empty else None


BEST_RULE = (
    "best = the size whose lower quartile over builds is highest (a noisy size cannot win on one "
    "lucky build)"
)


def fastest_machine(frame: pd.DataFrame, baseline: str) -> tuple[str, RatioInterval | None]:
    """The machine whose geomean speedup's lower bound is highest (one with fewer shared cases
    cannot win on a lucky interval), with that interval; the baseline itself, and None, when none is
    faster."""
    timings = timings_by_machine(frame)
    best: tuple[str, RatioInterval | None] = (baseline, None)
    for machine in (m for m in frame["machine"].unique() if m != baseline):
        interval = speedup_interval(pair_timings(timings, baseline, machine), baseline, machine)
        if interval is not None and interval.low > (best[1].low if best[1] else 1.0):
            best = (machine, interval)
    return best


def by_speed(cases: pd.DataFrame, machines: list[str], baseline: str) -> list[str]:
    """`machines`, the baseline first, then the fastest against it (the geomean of its cases'
    baseline/machine medians) to the slowest; a machine with no case in common last."""
    both = cases.pivot_table(
        index="case_id", columns="machine", values="median_s", aggfunc="median"
    )

    def speed(machine: str) -> float:
        if machine == baseline or baseline not in both:
            return math.inf
        # no ok case: last
        return geomean((both[baseline] / both[machine]).dropna()) if machine in both else 0.0

    return sorted(machines, key=lambda m: -speed(m))
