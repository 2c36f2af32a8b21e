"""merged.csv's text: a read frame written column by column, each cell as schema.to_cell writes it
(what ResultsWriter wrote), without a Python call per cell: a store of a thousand runs is a few
hundred thousand rows."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype

from gpubench.harness.records.safe_files import replacing
from gpubench.harness.records.schema import kind_of, to_cell

# bounded memory: a few thousand rows of text at a time (raw samples are kilobytes a row)
CHUNK_ROWS = 4096
# floats below this hold their integer exactly; numpy's int64 cast is only safe below 2**63
EXACT_INT = 2**53


def _numbers(values: pd.Series, kind: str) -> list[str]:
    """An int or float column's cells: '' for a missing value, else repr of the float or str of the
    int."""
    array = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    present = ~np.isnan(array)
    cells = np.full(len(array), "", dtype=object)
    shown = array[present]
    if kind == "int" and np.all(np.abs(shown) < EXACT_INT):
        cells[present] = shown.astype(np.int64).astype(str)
    # a huge integer: Python's int of the float, as the row writer gives it
    elif kind == "int":
        cells[present] = [str(int(v)) for v in shown.tolist()]
    else:
        cells[present] = list(map(float.__repr__, shown.tolist()))
    return cells.tolist()


# one decoder for every cell: json.loads given parse_int builds a new one per call
FLOATS = json.JSONDecoder(parse_int=lambda digits: float(int(digits)))


def _samples(text: object) -> str:
    """A samples cell as the writer dumps it: the list re-dumped with every number a float."""
    return json.dumps(FLOATS.decode(text)) if isinstance(text, str) else ""


def column_cells(column: str, values: pd.Series) -> list[str]:
    """One column of a read frame as CSV cells. Text and booleans: each distinct value once."""
    kind = kind_of(column)
    if kind in ("int", "float") and pd.api.types.is_numeric_dtype(values.dtype):
        return _numbers(values, kind)
    if kind == "json":
        return [_samples(v) for v in values.tolist()]
    cells = values.astype(object).where(values.notna(), None).tolist()
    if kind in ("int", "float") or infer_dtype(cells, skipna=True) not in (
        "string",
        "boolean",
        "empty",
    ):
        # numbers held as objects: the row writer's cast
        cast = {"int": int, "float": float}.get(kind, lambda v: v)
        return [to_cell(None if v is None else cast(v)) for v in cells]
    # all text or all booleans: no two values hash alike
    distinct = {v: to_cell(v) for v in dict.fromkeys(cells)}
    return [distinct[v] for v in cells]


def write_cells(frame: pd.DataFrame, path: Path, columns: list[str], fix: str) -> None:
    """`columns` of a read frame as one CSV (csv.writer's quoting and line ends), whole or not at
    all, never through a link."""
    with replacing(path.parent, path.name, "output folder", fix, text=True) as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for start in range(0, len(frame), CHUNK_ROWS):
            part = frame.iloc[start : start + CHUNK_ROWS]
            writer.writerows(zip(*(column_cells(c, part[c]) for c in columns)))
