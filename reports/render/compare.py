"""`gpubench compare`'s text: what the judge found between two runs
(gpubench.reports.judge.compare), as a table row per case, the tally and the notes."""

from __future__ import annotations

from pathlib import Path

from gpubench.harness.core.percent import percent as share_percent
from gpubench.reports.judge.compare import Comparison, judge_paths
from gpubench.reports.judge.verdicts import ALPHA, MACHINE_WIDE, NOISE_FLOOR, Verdict, tally
from gpubench.reports.render.markdown import escape, table_row
from gpubench.reports.render.paired import estimate_cells, format_session
from gpubench.reports.render.units import human


def fmt_seconds(seconds: float) -> str:
    return human(seconds, "s") or "—"


def format_comparison(
    verdicts: list[Verdict],
    only_base: list[str],
    only_new: list[str],
    threshold: float,
    notes: list[str],
) -> str:
    lines = [
        "| case | base median | new median | new/base | 99% CI | p | detectable | verdict |",
        "|---|---:|---:|---:|---|---:|---:|---|",
    ]
    for v in verdicts:
        lines.append(
            table_row(
                [
                    v.case_id,
                    fmt_seconds(v.base_median_s),
                    fmt_seconds(v.new_median_s),
                    *estimate_cells(v, 0),
                    v.verdict + (f" ({v.note})" if v.note else ""),
                ]
            )
        )
    cases = [v for v in verdicts if v.case_id != MACHINE_WIDE]
    lines += [
        "",
        f"{len(cases)} cases compared (threshold {share_percent(threshold)}, alpha {ALPHA}, "
        f"between-run noise from the cases' scatter, at least {NOISE_FLOOR:.0%} per run): "
        + tally(cases),
    ]
    if only_base:
        lines.append(f"only in BASE ({len(only_base)}): " + escape(", ".join(only_base)))
    if only_new:
        lines.append(f"only in NEW ({len(only_new)}): " + escape(", ".join(only_new)))
    # notes quote reasons and labels from the files: one line each
    lines.extend(map(escape, notes))
    return "\n".join(lines)


def format_judged(comparison: Comparison, threshold: float) -> str:
    """A comparison as compare prints it: a paired session's table, or the unpaired one."""
    if comparison.session is not None:
        return format_session(comparison.session, threshold, comparison.sides)
    return format_comparison(
        comparison.verdicts,
        comparison.only_base,
        comparison.only_new,
        threshold,
        comparison.notes,
    )


def compare_paths(base: Path, new: Path, threshold: float) -> tuple[str, int]:
    """Text for the terminal and the exit code (the judge's: Comparison.exit_code)."""
    comparison = judge_paths(base, new, threshold)
    return format_judged(comparison, threshold), comparison.exit_code
