"""The report's "Before and after": the last two runs of a machine as `gpubench compare BEFORE
AFTER` judges them (gpubench.reports.judge.before_after): a report of one machine's runs answers
"did my change make it faster?" with compare's verdicts and intervals, never with a bare difference
of medians that compare would call inconclusive. The History line of a headline figure carries the
verdict of the case it was read from (docs/method.md, "How compare decides")."""

from __future__ import annotations

import math

import pandas as pd

# 0.1%, not 0%
from gpubench.harness.core.percent import percent as share_percent
from gpubench.reports.judge.before_after import (
    ORDER,
    THRESHOLD,
    RunPair,
    history_pairs,
    listed,
    pairs_of,
)
from gpubench.reports.judge.paired import MAX_SHOWN_CHANGE
from gpubench.reports.judge.references import FIGURES
from gpubench.reports.judge.verdicts import (
    ALPHA,
    MACHINE_WIDE,
    NOISE_FLOOR,
    Verdict,
    tally,
)
from gpubench.reports.render.compare import fmt_seconds
from gpubench.reports.render.markdown import Md, code, escape, md_rows, paragraph, section

# cases listed per machine; `gpubench compare` on the two runs' files lists every one
MAX_ROWS = 30
# case ids named of those only one run measured
NAMED = 5


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
    return {
        key: figure_judgement(key[2], first, last, pair)
        for key, (first, last, pair) in history_pairs(frame, runs, figures).items()
    }
