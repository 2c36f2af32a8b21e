"""The last two runs of a machine, judged as `gpubench compare BEFORE AFTER` judges them: a report
of one machine's runs answers "did my change make it faster?" with compare's verdicts and intervals,
never with a bare difference of medians that compare would call inconclusive. The History line of a
headline figure carries the verdict of the case it was read from (docs/method.md, "How compare
decides")."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

# 0.1%, not 0%
from gpubench.harness.core.percent import percent as share_percent
from gpubench.reports.aggregate import per_case
from gpubench.reports.compare import compare_frames, fmt_seconds, side_differences
from gpubench.reports.health import headlines
from gpubench.reports.load import base_labels, machine_keys, run_key
from gpubench.reports.markdown import Md, code, escape, md_rows, paragraph, section
from gpubench.reports.paired import MAX_SHOWN_CHANGE
from gpubench.reports.references import FIGURES
from gpubench.reports.verdicts import ALPHA, MACHINE_WIDE, NOISE_FLOOR, Judgement, Verdict, tally

# gpubench compare's default --threshold: the report says what compare would say
THRESHOLD = 0.05
# cases listed per machine; `gpubench compare` on the two runs' files lists every one
MAX_ROWS = 30
# case ids named of those only one run measured
NAMED = 5
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


def relative(change: float) -> str:
    """A signed relative change; beyond MAX_SHOWN_CHANGE its digits would be noise."""
    if change > MAX_SHOWN_CHANGE:
        return f"over +{MAX_SHOWN_CHANGE:.0%}"
    return f"{change:+.1%}" if abs(change) < 0.1 else f"{change:+.0%}"


def time_change(v: Verdict) -> str:
    """new/base time as a change with its interval: '+98% (-11% to +340%)'."""
    if math.isnan(v.ratio):
        return "—"
    interval = (
        f" ({relative(v.ci_low - 1)} to {relative(v.ci_high - 1)})" if v.ci_low is not None else ""
    )
    return relative(v.ratio - 1) + interval


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


def pair_table(pair: RunPair) -> str:
    """The cases worth a look, worst first, at most MAX_ROWS."""
    shown = sorted(
        (v for v in pair.verdicts if listed(v)), key=lambda v: (ORDER.index(v.verdict), v.case_id)
    )
    if not shown:
        return ""
    table = pd.DataFrame(
        [
            {
                "case": v.case_id,
                "before median": fmt_seconds(v.base_median_s),
                "after median": fmt_seconds(v.new_median_s),
                f"time change ({1 - ALPHA:.0%} CI)": time_change(v),
                "verdict": str(v.verdict) + (f" ({v.note})" if v.note else ""),
            }
            for v in shown[:MAX_ROWS]
        ]
    )
    more = (
        f"\n\n{len(shown) - MAX_ROWS} more, the least decided: `gpubench compare` on the two "
        "runs' files lists them all."
        if len(shown) > MAX_ROWS
        else ""
    )
    return md_rows(table) + more


def one_sided(run: str, cases: list[str]) -> str:
    if not cases:
        return ""
    names = ", ".join(cases[:NAMED]) + (
        f" and {len(cases) - NAMED} more" if len(cases) > NAMED else ""
    )
    return Md("- only in {} ({}): {}").format(code(run), len(cases), names)


def pair_part(pair: RunPair) -> str:
    cases = [v for v in pair.verdicts if v.case_id != MACHINE_WIDE]
    head = Md("**{}**: run {} → run {}: ").format(pair.machine, code(pair.before), code(pair.after))
    table = pair_table(pair)
    if not cases:
        head += "no case measured ok in both runs: nothing to compare."
    else:
        head += f"{len(cases)} cases compared: {tally(cases)}" + (
            "." if table else f"; none moved beyond {share_percent(THRESHOLD)}."
        )
    lines = [
        one_sided(pair.before, pair.only_before),
        one_sided(pair.after, pair.only_after),
        *(f"- {escape(note)}" for note in pair.notes),
    ]
    return "\n\n".join(filter(None, [paragraph(head, table), "\n".join(filter(None, lines))]))


def pairs_of(frame: pd.DataFrame) -> list[RunPair]:
    """The last two runs of every machine with two runs or more, judged."""
    keys = run_key(frame)
    return [
        judge_pair(frame[keys == runs[-2]], frame[keys == runs[-1]], machine)
        for machine, runs in machine_runs(frame, keys)
    ]


def render(frame: pd.DataFrame) -> str:
    """The report's "Before and after" section; nothing where no machine has two runs."""
    pairs = pairs_of(frame)
    if not pairs:
        return ""
    shown = share_percent(THRESHOLD)
    intro = (
        "The last two runs of each machine with several runs, judged as `gpubench compare BEFORE "
        f"AFTER` judges them (before is its BASE, after its NEW): threshold {shown}, "
        f"{1 - ALPHA:.0%} intervals, between-run noise from the cases' scatter (at least "
        f"{NOISE_FLOOR:.0%} per run). Listed: the cases called slower, faster, broken or cannot "
        f"judge, and those whose median moved beyond {shown} that compare cannot call yet "
        "(inconclusive); the others are counted. A time change below 0 is faster."
    )
    return section("Before and after", intro, *map(pair_part, pairs))


def headline_cases(rows: pd.DataFrame, keys: pd.Series) -> dict[tuple[str, str], str]:
    """(run key, headline figure) -> the case its value was read from (health.headlines). All runs
    at once: per_case and headlines cost per call."""
    # per run, as history.run_figures reads them
    heads = headlines(per_case(rows.assign(machine=keys[rows.index])))
    return {
        (str(run), figure): str(case)
        for run, figure, case in zip(heads["machine"], heads["figure"], heads["case_id"])
    }


def figure_judgement(
    figure: str, first_case: str | None, last_case: str | None, pair: RunPair
) -> str:
    """What compare says of a headline figure's change between two runs, in the figure's direction
    (a throughput rises when the time falls): '; inconclusive, 99% CI -11% to +340%'."""
    if first_case is None or last_case is None:
        return "; not judged"
    if first_case != last_case:
        return f"; not judged: {first_case} was best, then {last_case}"
    v = next((v for v in pair.verdicts if v.case_id == last_case), None)
    if v is None or v.ci_low is None or v.ci_high is None:
        return f"; {v.verdict if v is not None else 'not judged'}"
    # throughput = work / time
    if FIGURES[figure].higher_is_better:
        low, high = (1 / v.ci_high - 1, 1 / v.ci_low - 1 if v.ci_low > 0 else math.inf)
    else:
        low, high = v.ci_low - 1, v.ci_high - 1
    return f"; {v.verdict}, {1 - ALPHA:.0%} CI {relative(low)} to {relative(high)}"


def history_judgements(
    frame: pd.DataFrame, runs: pd.DataFrame, figures: list[str]
) -> dict[tuple[str, str, str], str]:
    """(first run key, last run key, figure) -> compare's word on that figure's change, for each
    machine's first and last run holding the figure (the pair a History line shows); runs:
    history.run_figures, with run_key."""
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
    said = {}
    for (first, last), named in wanted.items():
        pair = judge_pair(rows[first], rows[last], "")
        for figure in named:
            said[(first, last, figure)] = figure_judgement(
                figure, cases.get((first, figure)), cases.get((last, figure)), pair
            )
    return said
