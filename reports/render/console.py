"""A run's last lines on the console: the report's answer and its summary's headline figures as
plain text, what was written, and what to run next — so the answer is where the person is looking,
not only in report.md."""

from __future__ import annotations

import html
import re
import shlex
from pathlib import Path

import pandas as pd

from gpubench.harness.core.exits import UsageError
from gpubench.reports.judge import tables
from gpubench.reports.render import summary
from gpubench.reports.judge.aggregate import per_case
from gpubench.reports.render.build import answer
from gpubench.reports.judge.screen import is_smoke, trusted
from gpubench.reports.judge.load import load_results
from gpubench.reports.judge.ownership import dedupe
from gpubench.reports.judge.settled import undisturbed

# a run of one machine is its own baseline
UNSHOWN_FIGURES = ("speed vs baseline",)
MARKUP = re.compile(r"\*\*|`")
ESCAPED = re.compile(r"\\(.)")


def console_text(markdown: str) -> str:
    """What a markdown line says, as a terminal shows it: no emphasis, code ticks, backslash escapes
    or entities."""
    return html.unescape(ESCAPED.sub(r"\1", MARKUP.sub("", markdown)))


def figure_lines(table: pd.DataFrame) -> list[str]:
    """The summary's rows: `figure  value` for one machine; the machines as columns for several."""
    shown = table.drop(
        index=[name for name in UNSHOWN_FIGURES if name in table.index and len(table.columns) == 1]
    )
    # DataFrame.map is pandas 2.1's
    shown = shown.apply(lambda column: column.map(console_text))
    if len(shown.columns) == 1:
        width = max(map(len, shown.index), default=0)
        return [
            f"  {figure:<{width}}  {value}" for figure, value in shown.iloc[:, 0].items() if value
        ]
    return ["  " + line for line in shown.to_string().splitlines()]


def answer_lines(paths: list[Path]) -> list[str]:
    """The answer and the headline figures of the rows in `paths`, as the report says them; none for
    rows that hold no comparable figure (smoke runs) or cannot be read (the report said why)."""
    try:
        frame, _ = dedupe(load_results(paths, [], []), [])
    except UsageError:
        return []
    measured = undisturbed(frame[~is_smoke(frame)])
    if measured.empty:
        return [
            "gpubench: smoke-profile rows only: they test the suite at tiny sizes and hold no "
            "figure to compare (--profile quick measures)"
        ]
    base = tables.baseline_machine(frame, None)
    kept, kept_cases, left_out = trusted(measured, per_case(measured))
    if kept.empty:
        return []
    lines = [f"gpubench: {console_text(text)}"] if (text := answer(kept, kept_cases, base)) else []
    lines += figure_lines(summary.summary(kept, kept_cases, base, {}, measured[left_out.notna()]))
    # a figure past its bound is said where the summary leaves it out, never dropped without a word
    left = summary.left_out_lines(measured, left_out)
    return lines + [f"  {console_text(line)}" for line in left.splitlines()] if left else lines


def closing_lines(paths: list[Path], report: Path) -> list[str]:
    """After a run: the answer, the headline figures, the files written, what to run next."""
    plots = sorted(path.name for path in report.parent.glob("*.png"))
    # quoted: a space or a line break in a path stays pasteable
    rows = ", ".join(map(shell_word, paths))
    try:
        answer = answer_lines(paths)
    # the report is written and the rows whole: the run's exit stays its own
    except Exception as error:
        answer = [
            f"gpubench: the answer is in the report ({type(error).__name__} while saying it here: "
            f"{error})"
        ]
    return [
        *answer,
        f"gpubench: rows -> {rows}",
        f"gpubench: report -> {shell_word(report)}"
        + (f" ({len(plots)} plot(s) beside it)" if plots else ""),
        f"gpubench: next: gpubench compare BASE.csv {shell_word(paths[-1])} judges a change "
        "against an earlier run; -v shows pytest's own output and pytest-benchmark's table",
    ]


def shell_word(path: Path) -> str:
    """A path as one shell word on one line: quoted where it needs it, a line break as the shell's
    $'\\n'."""
    text = str(path)
    if text.isprintable():
        return shlex.quote(text)
    return "$'" + text.encode("unicode_escape").decode("ascii").replace("'", "\\'") + "'"
