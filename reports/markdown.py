"""Markdown rendering: returns text, writes nothing."""

from __future__ import annotations

import math

import pandas as pd


def md_table(frame: pd.DataFrame, index: bool = False, floatfmt: str = ".3g", human: bool = False) -> str:
    """A GitHub markdown table (no extra dependency: pandas.to_markdown needs tabulate). With
    `human`, columns the schema knows are shown in their unit at a readable scale (12.3 ms,
    1.5 GiB, 11.2 k samples/s); `spread` as a percentage."""
    if frame.empty:
        return "_no rows_"
    data = frame.reset_index() if index else frame
    header = "| " + " | ".join(str(c) for c in data.columns) + " |"
    rule = "|" + "|".join("---" for _ in data.columns) + "|"
    formats = [_formatter(str(c), floatfmt, human) for c in data.columns]
    body = ["| " + " | ".join(f(v) for f, v in zip(formats, row)) + " |" for row in data.itertuples(index=False)]
    return "\n".join([header, rule, *body])


def _formatter(column: str, floatfmt: str, human: bool):
    from harness.schema import BY_NAME, human_column

    if human and column in ("spread", "rel_iqr"):
        return lambda v: "" if _empty(v) else f"{v:.1%}"
    if human and column in BY_NAME and BY_NAME[column].unit not in ("", "x", "%"):
        return lambda v: "" if _empty(v) else human_column(column, v)
    return lambda v: cell(v, floatfmt)


def _empty(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def cell(value: object, floatfmt: str) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return format(value, floatfmt)
    return str(value).replace("|", "\\|").replace("\n", " ")


def section(title: str, *parts: str) -> str:
    return "\n\n".join([f"## {title}", *[p for p in parts if p]])


def image(path_name: str | None, alt: str) -> str:
    return f"![{alt}]({path_name})" if path_name else ""
