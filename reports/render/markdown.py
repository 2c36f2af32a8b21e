"""Markdown rendering: returns text, writes nothing. Every label comes from a CSV or sidecar and is
untrusted: `escape`, applied to every table cell, header and section title, makes it plain text that
cannot change the document's structure. The report's own markdown is an `Md`; labels enter it only
via `Md.format` or `code`."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from gpubench.reports.judge.text import plain

# What a label needs escaped to stay text, and only that: an escape no renderer needed is what a
# terminal shows (compare's and ab's tables are markdown too: "\~60 runs", "ids&lt;1024"). Always:
# code, emphasis, links, table cells, headings. Only where they act: `_` that can open or close
# emphasis (not mnist_epoch), `~` that can close a strikethrough (after a non-space: "~60 runs"
# cannot), a backslash before punctuation (not C:\path); the end of the text counts as anything,
# since what follows it is not known.
MARKDOWN = re.compile(
    r"([`*\[\]|#]|\\(?=[!-/:-@\[-`{-~]|$)|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])|(?<!\s)~)"
)
# a `>` starts a block quote only at the start of a line
QUOTE = re.compile(r"^(\s*)>")
# HTML: `<` opens a tag, comment or autolink only before a letter, `/`, `!` or `?`, or a `>` with no
# space between (<1@a.io> is an e-mail link): not "ids<1024", "a < b"; `&` starts a character
# reference only before `#` or letters and a `;`
HTML = re.compile(r"<(?=[A-Za-z/!?]|[^\s<>]*>|$)|&(?=[#0-9A-Za-z]*(;|$))")
ENTITIES = {"&": "&amp;", "<": "&lt;"}


class Md(str):
    """Markdown the report wrote itself: trusted as it is. Labels enter it through `format`."""

    def format(self, *args: Any, **kwargs: Any) -> Md:  # type: ignore[override]
        return Md(str.format(self, *map(_safe, args), **{k: _safe(v) for k, v in kwargs.items()}))


def _safe(value: Any) -> Any:
    """Text is escaped; numbers keep their format specs ({x:.1f})."""
    return escape(value) if isinstance(value, str) else value


def escape(text: object) -> Md:
    """Untrusted text as markdown that shows it literally, on one line."""
    if isinstance(text, Md):
        return text
    escaped = QUOTE.sub(r"\1\\>", MARKDOWN.sub(r"\\\1", plain(text)))
    return Md(HTML.sub(lambda match: ENTITIES[match.group()], escaped))


# a setting, dtype or design as gpubench writes it
SIMPLE = re.compile(r"[\w.,:=+/ -]*")


def code(text: object) -> Md:
    """A setting as a code span when gpubench wrote it; other text escaped (backslashes do not work
    in code spans)."""
    text = plain(text)
    return Md(f"`{text}`") if SIMPLE.fullmatch(text) else escape(text)


def table_row(cells: Iterable[object]) -> str:
    """One markdown table row, every cell escaped unless it is Md."""
    return "| " + " | ".join(escape(c) for c in cells) + " |"


def md_table(frame: pd.DataFrame, index: bool = False, human: bool = False) -> str:
    """A GitHub markdown table (pandas.to_markdown needs tabulate). With `human`, columns the schema
    knows are shown in their unit at a readable scale (12.3 ms, 1.5 GiB); `spread` as a
    percentage."""
    if frame.empty:
        return "_no rows_"
    data = frame.reset_index() if index else frame
    header = table_row(str(c) for c in data.columns)
    rule = "|" + "|".join("---" for _ in data.columns) + "|"
    formats = [_formatter(str(c), human) for c in data.columns]
    body = [
        table_row(v if isinstance(v, Md) else f(v) for f, v in zip(formats, row))
        for row in data.itertuples(index=False)
    ]
    return "\n".join([header, rule, *body])


def same_rows_folded(frame: pd.DataFrame, column: str = "machine") -> pd.DataFrame:
    """Rows alike in every column but `column` as one row, their `column` values joined ('a · H200,
    b · H200'): two machines that read the same share a line."""
    if column not in frame or len(frame) < 2:
        return frame
    rest = frame.drop(columns=[column])
    keys = pd.Series(
        ["\x1f".join(map(str, row)) for row in rest.itertuples(index=False)], index=frame.index
    )
    joined = frame[column].astype(str).groupby(keys, sort=False).agg(", ".join)
    first = ~keys.duplicated()
    return frame[first].assign(**{column: list(joined[keys[first]])})


def constant_columns(
    frame: pd.DataFrame, human: bool = False, min_rows: int = 2
) -> tuple[pd.DataFrame, str]:
    """`frame` less the columns that read the same in every row, and the sentence that says them
    once ('Every row: target_accuracy 85.0%, not_converged 0; none: compile_s.'); a table of fewer
    than `min_rows` rows as it is."""
    if len(frame) < min_rows:
        return frame, ""
    texts = {str(c): [_formatter(str(c), human)(v) for v in frame[c]] for c in frame.columns}
    same = [c for c in texts if len(set(texts[c])) == 1][: len(texts) - 1]
    if not same:
        return frame, ""
    said = ", ".join(f"{c} {texts[c][0]}" for c in same if texts[c][0])
    none = ", ".join(c for c in same if not texts[c][0])
    return frame.drop(columns=same), escape(
        "Every row: " + "; ".join(p for p in (said, none and f"none: {none}") if p) + "."
    )


def md_rows(frame: pd.DataFrame, human: bool = False) -> str:
    """A table of one row as one line, each cell after its column's name ('compile_s 12.5 s;
    gain_pct 10.7'); a longer one as md_table."""
    if len(frame) != 1:
        return md_table(frame, human=human)
    cells = [
        (str(c), v if isinstance(v, Md) else _formatter(str(c), human)(v))
        for c, v in frame.iloc[0].items()
    ]
    return "; ".join(escape(c) + " " + escape(v) for c, v in cells if v != "") + "."


def paragraph(intro: str, rows: str) -> str:
    """`intro` and md_rows' text: one paragraph where that is a line, the intro above the table
    otherwise."""
    return (
        "\n\n".join(filter(None, [intro, rows]))
        if rows.startswith("|")
        else " ".join(filter(None, [intro, rows]))
    )


def _formatter(column: str, human: bool):
    from gpubench.harness.core.percent import percent
    from gpubench.reports.render.units import human_column, unit_of

    if human and column in ("spread", "rel_iqr", "windows_spread"):
        # a spread of 0.3% is not 0.0%
        return lambda v: "" if _empty(v) else percent(v, 1)
    if human and unit_of(column) not in ("", "x", "%"):
        return lambda v: "" if _empty(v) else human_column(column, v)
    return cell


def _empty(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def cell(value: object) -> str:
    if _empty(value):
        return ""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:.3g}"
    return str(value)


def section(title: str, *parts: str) -> str:
    return "\n\n".join([f"## {escape(title)}", *[p for p in parts if p]])


def image(path: Path | str | None, alt: str) -> str:
    """A link to a PNG of the report's folder (by its name), or "" where none was drawn."""
    return f"![{escape(alt)}]({Path(path).name})" if path else ""
