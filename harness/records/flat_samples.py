"""Raw-samples cells judged in bulk (a thousand runs hold 200,000 distinct ones; parse_cell reads each in Python).
Answers only "surely accepted"; any other cell (damage, NaN, nesting, an odd space) is left to parse_cell."""

from __future__ import annotations

import re

import numpy as np

JSON_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"  # json's grammar: no 01, .5, 1., +1, NaN
JSON_SPACE = r"[ \t\n\r]*"  # the only white space json.loads skips
FLAT_LIST = re.compile(rf"{JSON_SPACE}\[{JSON_SPACE}(?:{JSON_NUMBER}(?:{JSON_SPACE},{JSON_SPACE}{JSON_NUMBER})*)?"
                       rf"{JSON_SPACE}\]{JSON_SPACE}")


def within(texts: list[str], low: float, high: float) -> list[bool]:
    """Per text: True where surely a flat JSON list of numbers in [low, high] (empty too); one numpy parse for all."""
    flat = [i for i, text in enumerate(texts) if FLAT_LIST.fullmatch(text)]
    inner = [texts[i].strip(" \t\n\r")[1:-1].strip(" \t\n\r") for i in flat]
    counts = np.array([text.count(",") + 1 if text else 0 for text in inner], dtype=np.int64)
    joined = ",".join(text for text in inner if text)
    values = np.fromstring(joined, dtype=float, sep=",") if counts.any() else np.zeros(0)
    verdict = [False] * len(texts)
    if len(values) != counts.sum():  # the grammar above and numpy disagree on a cell: parse_cell decides all
        return verdict
    good = (values >= low) & (values <= high)
    filled = counts > 0
    all_good = np.ones(len(flat), dtype=bool)  # an empty list is in bounds
    if filled.any():
        starts = np.concatenate(([0], np.cumsum(counts[filled])[:-1]))
        all_good[filled] = np.logical_and.reduceat(good, starts)
    for i, ok in zip(flat, all_good.tolist()):
        verdict[i] = ok
    return verdict
