"""The schema's cell rules over many cells at once, for read_frame; they must agree cell for cell with
schema.parse_cell (tests/test_results.py holds them to it). Number columns go as one numpy block: pandas' fixed cost
per column made a small file's hundred number columns cost more than their cells."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpubench.harness.records.flat_samples import within
from gpubench.harness.records.schema import (BOOL_WORDS, BY_NAME, FRACTIONS, MAX_DURATION_S, MIN_DURATION_S, NUMBER,
                                             TEXT_RULES, TIMED, _refused, kind_of, non_negative)

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd


def is_number_column(column: str) -> bool:
    return kind_of(column) in ("int", "float")


def parse_numbers(text: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """The number columns of `text` ("" when empty) at once: (floats, NaN when empty; a mask of refused cells)."""
    import numpy as np
    import pandas as pd

    cells = text.to_numpy(dtype=object)
    filled = cells != ""  # most columns of most rows are empty: only the others are looked at
    texts = cells[filled]
    number = (pd.Series(texts, dtype=object).str.fullmatch(NUMBER).to_numpy(dtype=bool) if texts.size
              else np.zeros(0, bool))
    read = np.full(texts.shape, np.nan)
    read[number] = texts[number].astype(float)
    values = np.full(cells.shape, np.nan)
    values[filled] = read
    refused = np.zeros(cells.shape, dtype=bool)
    refused[filled] = ~number
    refused |= filled & _broken_rules(list(text.columns), values)
    return pd.DataFrame(values, index=text.index, columns=text.columns), refused


def _broken_rules(columns: list[str], values: np.ndarray) -> np.ndarray:
    """Where a number breaks its column's rule (fractional int, infinity, negative count, fraction outside [0, 1],
    impossible duration). NaN breaks only the int rule, which the caller masks."""
    import numpy as np

    specs = [BY_NAME.get(column) for column in columns]
    is_int = np.array([kind_of(column) == "int" for column in columns])
    unsigned = np.array([spec is not None and non_negative(spec) for spec in specs])
    fraction = np.array([column in FRACTIONS for column in columns])
    seconds = np.array([spec is not None and spec.unit == "s" for spec in specs])
    timed = np.array([column in TIMED for column in columns])
    with np.errstate(invalid="ignore"):
        broken = np.where(is_int, np.mod(values, 1) != 0, np.abs(values) == np.inf)
        broken |= unsigned & (values < 0)
        broken |= fraction & ((values < 0) | (values > 1))
        broken |= seconds & ((values > MAX_DURATION_S) | (timed & (values < MIN_DURATION_S)))
    return broken


def shared_texts(text: pd.DataFrame) -> pd.DataFrame:
    """Text columns, None when empty and equal texts one object: a thousand runs' repeated strings take the memory
    of their distinct values."""
    import numpy as np
    import pandas as pd

    cells = text.to_numpy(dtype=object)
    codes, distinct = pd.factorize(cells.ravel())
    shared = np.asarray(distinct, dtype=object)[codes].reshape(cells.shape)
    shared[cells == ""] = None
    # object: pandas would infer its string dtype, NaN for None
    return pd.DataFrame(shared, index=text.index, columns=text.columns, dtype=object)


def parse_column(column: str, text: Any) -> tuple[Any, Any]:
    """parse_cell over a Series at once: (values, refused mask). Numbers as floats (NaN when empty), booleans as
    True/False/None, text and JSON as text (None when empty); ruled text and JSON via parse_cell per distinct text."""
    import pandas as pd

    if is_number_column(column):
        values, refused = parse_numbers(text.to_frame(column))
        return values[column], pd.Series(refused[:, 0], index=text.index)
    empty = text == ""
    if empty.all() and column not in TEXT_RULES:  # nothing to read, no rule an empty cell breaks
        return text.where(~empty, None), ~empty
    kind = kind_of(column)
    if kind == "bool":
        values = text[~empty].str.strip().str.lower().map(BOOL_WORDS).reindex(text.index)
        return values.astype(object).where(values.notna(), None), values.isna() & ~empty
    if kind in ("json", "object") or column in TEXT_RULES:
        distinct = text.unique().tolist()
        # raw samples: those surely in bounds judged at once (flat_samples), the rest cell by cell
        sure = within(distinct, MIN_DURATION_S, MAX_DURATION_S) if kind == "json" else [False] * len(distinct)
        verdicts = {t: not ok and _refused(column, t) for t, ok in zip(distinct, sure)}
        refused = text.map(verdicts).astype(bool)
    else:
        refused = empty & False
    return text.where(~empty, None), refused
