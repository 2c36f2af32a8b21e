"""Unpaired comparisons with 2+ runs per side: runs as units, so the noise a change must beat is the
scatter between each side's own runs, measured (a shift common to every case, such as a torch,
driver or BIOS change, is no longer absorbed as noise). A case: Welch's t over the runs'
log-medians; the machine-wide line: per run, the median over common cases of the run's log-median
minus the case's mean, then Welch's t between the sides' runs."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd

from gpubench.reports.judge.verdicts import MACHINE_WIDE, Judgement, Verdict, decide, t_estimate


def run_logs(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows: run_id; columns: case_id; values: log of the run's median over its ok builds."""
    ok = frame[(frame["status"] == "ok") & (frame["median_s"] > 0)]
    return np.log(ok.groupby(["run_id", "case_id"])["median_s"].median().unstack("case_id"))


def runs_per_side(base: pd.DataFrame, new: pd.DataFrame) -> int:
    return min(base["run_id"].nunique(), new["run_id"].nunique())


def welch(
    case_id: str, base: np.ndarray, new: np.ndarray, threshold: float, note: str, busy2: float = 0.0
) -> Verdict:
    """Verdict of new against base from two samples of run-level logs (Welch's t); busy2, the
    variance busy rows add (reports/judge/busy.py), a fixed term with no degrees of freedom of its
    own."""
    d = float(new.mean() - base.mean())
    var_b, var_n = base.var(ddof=1) / base.size, new.var(ddof=1) / new.size
    se, denominator = (
        math.sqrt(var_b + var_n + busy2),
        var_b**2 / (base.size - 1) + var_n**2 / (new.size - 1),
    )
    dof = se**4 / denominator if denominator > 0 else float(base.size + new.size - 2)
    estimate = t_estimate(d, se, dof)
    return Verdict.of(
        case_id,
        (math.exp(base.mean()), math.exp(new.mean())),
        estimate,
        decide(estimate, threshold),
        f"{base.size} vs {new.size} runs" + (f"; {note}" if note else ""),
    )


def case_verdicts(
    base: pd.DataFrame,
    new: pd.DataFrame,
    threshold: float,
    cases: list[str],
    busy2: dict[str, float] | None = None,
) -> list[Verdict]:
    base_logs, new_logs = run_logs(base), run_logs(new)
    verdicts = []
    for case_id in cases:
        b, n = base_logs[case_id].dropna().to_numpy(), new_logs[case_id].dropna().to_numpy()
        if b.size >= 2 and n.size >= 2:
            verdicts.append(
                welch(case_id, b, n, threshold, "runs as units", (busy2 or {}).get(case_id, 0.0))
            )
    return verdicts


def machine_wide(
    base: pd.DataFrame, new: pd.DataFrame, threshold: float, busy2: float = 0.0
) -> Verdict | None:
    """The machine-wide line: judged with 2+ runs per side, else printed with its measured shift."""
    base_logs, new_logs = run_logs(base), run_logs(new)
    common = sorted(set(base_logs.columns) & set(new_logs.columns))
    both = pd.concat({"base": base_logs[common], "new": new_logs[common]}).dropna(axis=1)
    if both.shape[1] < 2:
        return None
    # each run's level: the median case's distance from its mean
    levels = (both - both.mean()).median(axis=1)
    b, n = levels.loc["base"].to_numpy(), levels.loc["new"].to_numpy()
    if b.size >= 2 and n.size >= 2:
        verdict = welch(
            MACHINE_WIDE, b, n, threshold, f"median over {both.shape[1]} cases per run", busy2
        )
        return replace(verdict, base_median_s=math.nan, new_median_s=math.nan)
    shift = math.exp(float(n.mean() - b.mean()))
    return Verdict(
        MACHINE_WIDE,
        math.nan,
        math.nan,
        shift,
        None,
        None,
        None,
        None,
        Judgement.NOT_JUDGED,
        "one run per side: a machine that was slower during one run and a change that slowed "
        "every case look alike — give 2+ runs per side (gpubench compare BASE_DIR/ NEW_DIR/, a "
        "folder of runs each) or run a paired session (gpubench ab) to judge it",
    )
