"""Markdown rendering: returns text, writes nothing."""

from __future__ import annotations

import math

import pandas as pd


def md_table(frame: pd.DataFrame, index: bool = False, floatfmt: str = ".3g") -> str:
    """A GitHub markdown table (no extra dependency: pandas.to_markdown needs tabulate)."""
    if frame.empty:
        return "_no rows_"
    data = frame.reset_index() if index else frame
    header = "| " + " | ".join(str(c) for c in data.columns) + " |"
    rule = "|" + "|".join("---" for _ in data.columns) + "|"
    body = ["| " + " | ".join(cell(v, floatfmt) for v in row) + " |" for row in data.itertuples(index=False)]
    return "\n".join([header, rule, *body])


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
