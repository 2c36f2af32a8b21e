"""The last two runs of a machine, judged as `gpubench compare BEFORE AFTER` judges them, and the
pairs of runs a History line reads (docs/method.md, "How compare decides"): which runs are paired,
their verdicts, which of them a reader must see. gpubench.reports.render.before_after says them."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from gpubench.reports.judge.aggregate import per_case
from gpubench.reports.judge.compare import compare_frames, side_differences
from gpubench.reports.judge.health import headlines
from gpubench.reports.judge.load import base_labels, machine_keys, run_key
from gpubench.reports.judge.verdicts import Judgement, Verdict

# gpubench compare's default --threshold: the report says what compare would say
THRESHOLD = 0.05
# listed first: what fails a gate, then what a reader must look at, then what more runs would tell
ORDER = (
    Judgement.SLOWER,
    Judgement.BROKEN,
    Judgement.CANNOT_JUDGE,
    Judgement.TWO_MODES,
    Judgement.FASTER,
    Judgement.INCONCLUSIVE,
)


@dataclass(frozen=True)
class RunPair:
    """Two runs of one machine, older first, as compare judged them."""

    machine: str
    # run ids
    before: str
    after: str
    verdicts: list[Verdict]
    only_before: list[str]
    only_after: list[str]
    notes: list[str]


def machine_runs(frame: pd.DataFrame, keys: pd.Series) -> list[tuple[str, list[str]]]:
    """Per machine (load.MACHINE) with two runs or more: its label and its run keys, oldest first
    (a run starts at its earliest timestamp, parsed: +14:00 sorts wrongly as text)."""
    at = pd.to_datetime(frame["timestamp_utc"], utc=True, format="ISO8601", errors="coerce")
    # one row per run: its machine and label
    firsts = frame[~keys.duplicated()]
    runs = pd.DataFrame(
        {"machine": machine_keys(firsts).to_numpy(), "label": base_labels(firsts).to_numpy()},
        index=keys[firsts.index].to_numpy(),
    )
    runs["started"] = at.groupby(keys, sort=False).min()
    ordered = runs.sort_values("started", kind="stable").groupby("machine", sort=False)
    return [
        (str(group["label"].iloc[0]), list(group.index)) for _, group in ordered if len(group) >= 2
    ]


# The columns compare reads (compare, busy, replicates, load.broken_rows, side_differences): it
# selects rows case by case, and a report's rows carry 180 columns
COMPARED = (
    "run_id",
    "machine_id",
    "device",
    "device_name",
    "profile",
    "torch_version",
    "dataset",
    "case_id",
    "status",
    "reason",
    "stopped_by",
    "flags",
    "median_s",
    "samples_s",
    "torch_threads",
    "raced",
    "precision",
    # what compare reads: its notes on threads and a race's winner too
    "channels_last",
)


def judge_pair(before: pd.DataFrame, after: pd.DataFrame, machine: str) -> RunPair:
    """Two runs' rows judged by compare, with what differs between them besides the code (torch,
    profile)."""
    before, after = (rows[[c for c in COMPARED if c in rows]] for rows in (before, after))
    verdicts, only_before, only_after, notes = compare_frames(before, after, THRESHOLD)
    return RunPair(
        machine,
        str(before["run_id"].iloc[0]),
        str(after["run_id"].iloc[0]),
        verdicts,
        only_before,
        only_after,
        side_differences(before, after) + notes,
    )


def listed(v: Verdict) -> bool:
    """What a reader must see: a verdict other than "no change", except an inconclusive case whose
    medians moved less than the threshold (counted, not listed: nothing suggests it changed)."""
    if v.verdict not in ORDER:
        return False
    # a case compare could not estimate (one sample on a side) still has its two medians
    moved = (
        v.new_median_s / v.base_median_s if math.isnan(v.ratio) and v.base_median_s > 0 else v.ratio
    )
    return v.verdict != Judgement.INCONCLUSIVE or not 1 / (1 + THRESHOLD) <= moved <= 1 + THRESHOLD


def pairs_of(frame: pd.DataFrame) -> list[RunPair]:
    """The last two runs of every machine with two runs or more, judged."""
    keys = run_key(frame)
    return [
        judge_pair(frame[keys == runs[-2]], frame[keys == runs[-1]], machine)
        for machine, runs in machine_runs(frame, keys)
    ]


def headline_cases(rows: pd.DataFrame, keys: pd.Series) -> dict[tuple[str, str], str]:
    """(run key, headline figure) -> the case its value was read from (health.headlines). All runs
    at once: per_case and headlines cost per call."""
    # per run, as history.run_figures reads them
    heads = headlines(per_case(rows.assign(machine=keys[rows.index])))
    return {
        (str(run), figure): str(case)
        for run, figure, case in zip(heads["machine"], heads["figure"], heads["case_id"])
    }


def history_pairs(
    frame: pd.DataFrame, runs: pd.DataFrame, figures: list[str]
) -> dict[tuple[str, str, str], tuple[str | None, str | None, RunPair]]:
    """(first run key, last run key, figure) -> the cases the figure was read from in those two runs
    and the pair as compare judged it, for each machine's first and last run holding the figure
    (the pair a History line shows); runs: history.run_figures, with run_key."""
    keys = run_key(frame)
    wanted: dict[tuple[str, str], list[str]] = {}
    for _, group in runs.groupby(machine_keys(runs), sort=False):
        for figure in figures:
            points = group.dropna(subset=[figure])
            if len(points) >= 2:
                wanted.setdefault(
                    (points["run_key"].iloc[0], points["run_key"].iloc[-1]), []
                ).append(figure)
    needed = frame[keys.isin({k for pair in wanted for k in pair})]
    rows, cases = dict(tuple(needed.groupby(keys))), headline_cases(needed, keys)
    found = {}
    for (first, last), named in wanted.items():
        pair = judge_pair(rows[first], rows[last], "")
        for figure in named:
            found[(first, last, figure)] = (
                cases.get((first, figure)),
                cases.get((last, figure)),
                pair,
            )
    return found
