"""Raw-samples cells (JSON lists of seconds) judged in bulk: a store of a thousand runs holds 200,000
distinct ones, and parse_cell (gpubench.harness.records.schema) reads each in Python. This answers only
"surely accepted": a cell in json's own grammar whose numbers all lie within the bounds; any other
cell (damage, NaN, a nested list, an odd space) is left to parse_cell, which says why."""

from __future__ import annotations

import re

import numpy as np

JSON_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"  # json's grammar: no 01, .5, 1., +1, NaN
JSON_SPACE = r"[ \t\n\r]*"  # the only white space json.loads skips
FLAT_LIST = re.compile(rf"{JSON_SPACE}\[{JSON_SPACE}(?:{JSON_NUMBER}(?:{JSON_SPACE},{JSON_SPACE}{JSON_NUMBER})*)?"
                       rf"{JSON_SPACE}\]{JSON_SPACE}")


def within(texts: list[str], low: float, high: float) -> list[bool]:
    """Per text: True where it is a flat JSON list of numbers, each within [low, high] (an empty list
    too); False where that is not sure. The numbers of all the lists are parsed by one numpy call."""
    flat = [i for i, text in enumerate(texts) if FLAT_LIST.fullmatch(text)]
    inner = [texts[i].strip(" \t\n\r")[1:-1].strip(" \t\n\r") for i in flat]
    counts = np.array([text.count(",") + 1 if text else 0 for text in inner], dtype=np.int64)
    values = np.fromstring(",".join(text for text in inner if text), dtype=float, sep=",") if counts.any() else np.zeros(0)
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
