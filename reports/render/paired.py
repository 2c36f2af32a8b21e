"""A paired A/B session's verdicts as `gpubench ab` and `gpubench compare` print them
(gpubench.reports.judge.paired judges them): a table row per case, then the tally."""

from __future__ import annotations

import math

from gpubench.harness.core.percent import percent as share_percent
from gpubench.reports.judge.paired import MAX_SHOWN_CHANGE, PairedSession
from gpubench.reports.judge.verdicts import ALPHA, MACHINE_WIDE, Verdict, tally
from gpubench.reports.render.markdown import escape, table_row


def percent(change: float, decimals: int = 1) -> str:
    """A detectable change as a percentage; beyond MAX_SHOWN_CHANGE the digits would be noise: "over
    1000%" (words, not ">": cells are escaped for markdown, and `&gt;` is what a terminal would
    show)."""
    return (
        f"{change:.{decimals}%}" if change <= MAX_SHOWN_CHANGE else f"over {MAX_SHOWN_CHANGE:.0%}"
    )


def factor(value: float) -> str:
    """A ratio or an interval bound: three decimals, or two significant digits far from 1."""
    return f"{value:.3f}" if 1e-3 <= value < 1e3 else f"{value:.2g}"


def estimate_cells(v: Verdict, decimals: int = 1) -> list[str]:
    """new/base, its interval, p and the detectable change as table cells ("—" where there is none):
    no figure printed with more digits than it means."""
    ci = (
        f"{factor(v.ci_low)}–{factor(v.ci_high)}"
        if v.ci_low is not None and v.ci_high is not None
        else "—"
    )
    return [
        factor(v.ratio) if not math.isnan(v.ratio) else "—",
        ci,
        f"{v.p_value:.2g}" if v.p_value is not None else "—",
        percent(v.detectable, decimals) if v.detectable is not None else "—",
    ]


def format_session(
    session: PairedSession, threshold: float, sides: tuple[str, str] = ("A", "B")
) -> str:
    a, b = sides
    interval, p_name = ("CS", "p (always valid)") if session.sequential else ("CI", "p")
    lines = [
        f"| case | {a} median | {b} median | {b}/{a} | {1 - ALPHA:.0%} {interval} | {p_name} | "
        "detectable | verdict |",
        "|---|---:|---:|---:|---|---:|---:|---|",
    ]
    for v in session.verdicts:
        a_s, b_s = (
            f"{s * 1e3:.4g} ms" if not math.isnan(s) else "—"
            for s in (v.base_median_s, v.new_median_s)
        )
        lines.append(
            table_row([v.case_id, a_s, b_s, *estimate_cells(v), f"{v.verdict} ({v.note})"])
        )
    detectable = session.median_detectable
    kind = (
        f"sequential paired session: up to {session.pairs} pairs a case (looked at after every "
        "pair)"
        if session.sequential
        else f"paired session: {session.pairs} pairs"
    )
    # the machine-wide line is no case
    cases = [v for v in session.verdicts if v.case_id != MACHINE_WIDE]
    lines += [
        "",
        f"{kind}, threshold {share_percent(threshold)}, alpha {ALPHA}: {len(cases)} cases: "
        + tally(cases)
        + (f"; median detectable change {percent(detectable)}" if detectable is not None else ""),
    ]
    # notes quote reasons from the files
    return "\n".join(lines + [escape(note) for note in session.notes])
