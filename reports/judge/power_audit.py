"""The power audit: how often the gate speaks when it should, and stays quiet when it should. Known
changes are injected into A/A data (the NEW side's times of chosen cases scaled) and judged as
`compare` or `gpubench ab` would, counted per case-comparison and per comparison (exit 1).
`scripts/power-audit` runs it on folders of runs."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from collections.abc import Callable, Iterable

import numpy as np
import pandas as pd

from gpubench.harness.core.exits import ExitCode
from gpubench.reports.judge.compare import compare_frames
from gpubench.reports.judge.paired import judge_session
from gpubench.reports.judge.verdicts import MACHINE_WIDE, Judgement, Verdict, exit_code_of

TIME_COLUMNS = ("median_s", "min_s", "mean_s", "iqr_s", "stddev_s")


@dataclass(frozen=True)
class Scenario:
    name: str
    factor: float
    # "none" | "case" | "workload" | "all"
    scope: str

    def variants(self, case_ids: list[str]) -> list[list[str]]:
        """The sets of cases this scenario slows, one comparison each."""
        if self.scope == "none":
            return [[]]
        if self.scope == "all":
            return [list(case_ids)]
        if self.scope == "case":
            return [[case] for case in case_ids]
        workloads = sorted({c.split("/", 1)[0] for c in case_ids})
        return [[c for c in case_ids if c.startswith(w + "/")] for w in workloads]


SCENARIOS = (
    Scenario("A/A", 1.0, "none"),
    Scenario("one case x1.10", 1.10, "case"),
    Scenario("one case x1.25", 1.25, "case"),
    Scenario("one case x2", 2.0, "case"),
    Scenario("one workload x1.3", 1.3, "workload"),
    Scenario("every case x1.05", 1.05, "all"),
    Scenario("every case x1.15", 1.15, "all"),
    Scenario("every case x1.10", 1.10, "all"),
)


def inject(frame: pd.DataFrame, cases: Iterable[str], factor: float) -> pd.DataFrame:
    """The frame with the chosen cases' times (and raw samples) scaled by `factor`."""
    out = frame.copy()
    mask = out["case_id"].isin(list(cases))
    for column in TIME_COLUMNS:
        if column in out:
            out.loc[mask, column] = out.loc[mask, column] * factor
    if "samples_s" in out:
        out.loc[mask, "samples_s"] = out.loc[mask, "samples_s"].map(
            lambda cell: _scaled(cell, factor)
        )
    return out


def _scaled(cell: object, factor: float) -> object:
    return (
        json.dumps([float(x) * factor for x in json.loads(cell)])
        if isinstance(cell, str) and cell.strip()
        else cell
    )


@dataclass
class _Tally:
    comparisons: int = 0
    # comparisons that exited 1
    exits: int = 0
    # comparisons that exited 6: cannot judge, busy (never on rows not flagged busy)
    cannot: int = 0
    # injected case-comparisons
    target_calls: int = 0
    # ... called slower
    caught: int = 0
    # untouched case-comparisons
    other_calls: int = 0
    # ... called slower or faster
    false_flags: int = 0
    detectable: list[float] = field(default_factory=list)

    def add(self, verdicts: list[Verdict], slowed: set[str]) -> None:
        self.comparisons += 1
        code = exit_code_of(verdicts)
        self.exits += code == ExitCode.FAILED
        self.cannot += code == ExitCode.CANNOT_JUDGE
        for v in (v for v in verdicts if v.case_id != MACHINE_WIDE):
            if v.case_id in slowed:
                self.target_calls += 1
                self.caught += v.verdict == Judgement.SLOWER
            else:
                self.other_calls += 1
                self.false_flags += v.verdict in (Judgement.SLOWER, Judgement.FASTER)
            if v.detectable is not None and math.isfinite(v.detectable):
                self.detectable.append(v.detectable)

    def row(self, name: str) -> dict[str, object]:
        return {
            "scenario": name,
            "comparisons": self.comparisons,
            "exit 1": f"{self.exits}/{self.comparisons}",
            "exit 6 (cannot judge: busy)": f"{self.cannot}/{self.comparisons}",
            "injected cases caught": f"{self.caught}/{self.target_calls}"
            if self.target_calls
            else "—",
            "untouched cases flagged": f"{self.false_flags}/{self.other_calls}",
            "median detectable": f"{np.median(self.detectable):.1%}" if self.detectable else "—",
        }


Judge = Callable[[pd.DataFrame, pd.DataFrame, float], list[Verdict]]


def unpaired_judge(base: pd.DataFrame, new: pd.DataFrame, threshold: float) -> list[Verdict]:
    return compare_frames(base, new, threshold)[0]


def paired_judge(a: pd.DataFrame, b: pd.DataFrame, threshold: float) -> list[Verdict]:
    return judge_session(a, b, threshold).verdicts


def audit(
    comparisons: list[tuple[pd.DataFrame, pd.DataFrame]],
    judge: Judge,
    threshold: float = 0.05,
    scenarios: tuple[Scenario, ...] = SCENARIOS,
) -> pd.DataFrame:
    """One row per scenario: every (base, new) comparison judged with the change injected into
    new."""
    rows = []
    for scenario in scenarios:
        tally = _Tally()
        for base, new in comparisons:
            case_ids = sorted(
                set(base.loc[base["status"] == "ok", "case_id"])
                & set(new.loc[new["status"] == "ok", "case_id"])
            )
            for slowed in scenario.variants(case_ids):
                tally.add(judge(base, inject(new, slowed, scenario.factor), threshold), set(slowed))
        rows.append(tally.row(scenario.name))
    return pd.DataFrame(rows)
