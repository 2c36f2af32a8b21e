"""Reading results files: read_frame is the one reader of the writer's CSVs, typed by the schema
and upgraded from older versions; read_rows serves the harness, reports.judge.load the report
commands. The schema's cell rules (its CHECKS on numbers, its parse_cell) are applied here over
many cells at once; a refused cell's message is parse_cell's. Number columns go as one numpy
block: pandas' fixed cost per column made a small file's hundred number columns cost more than
their cells."""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpubench.harness.records.safe_files import read_regular
from gpubench.harness.records.upgrade import upgrade_row
from gpubench.harness.records.schema import (
    BOOL_WORDS,
    BY_NAME,
    CHECKS,
    COLUMNS,
    NUMBER,
    REQUIRED_COLUMNS,
    SCHEMA_VERSION,
    TEXT_RULES,
    ImpossibleValue,
    SchemaError,
    kind_of,
    parse_cell,
)

# imported where a file is read: the harness writes far more often than it reads
if TYPE_CHECKING:
    import numpy as np
    import pandas as pd


def ends_whole(data: bytes) -> bool:
    """Every written row ends in a newline: a file that does not (trailing spaces aside) was cut
    mid-row."""
    tail = data[-4096:].rstrip(b" \t\r\f\v")
    return not tail or tail.endswith(b"\n")


# 100 times a long run's file: a larger one is a stray, left unread
MAX_RESULTS_BYTES = 256 * 2**20
# 7 times the schema's: room for newer writers' columns, none for a stray of thousands
MAX_COLUMNS = 1000

# Files other tools hand back in a results folder: said for what they are, not as a broken CSV
PACKED = {
    b"\x1f\x8b": "a gzip file — gunzip it first",
    b"PK\x03\x04": "a zip file (or .xlsx) — export it as CSV",
    b"BZh": "a bzip2 file — bunzip2 it first",
    b"\xfd7zXZ": "an xz file — unxz it first",
}


def not_csv_text(data: bytes) -> str | None:
    """Why `data` is no results CSV before it is decoded: empty, packed, or lines ended by CR alone
    (old Mac text, which the reader would take for one long line and call truncated)."""
    # no stripped copy: a 200 MB file would be held twice
    if not data or data.isspace():
        return "empty — it holds no rows; move it out of the folder"
    packed = next((what for magic, what in PACKED.items() if data.startswith(magic)), None)
    if packed is not None:
        return f"not a CSV but {packed}"
    if b"\r" in data and b"\n" not in data:
        return (
            "its lines end in CR alone — convert them to LF (dos2unix -c mac FILE), then read it "
            "again"
        )
    return None


class _Records:
    """The header and records of one results CSV, checked as they stream: a gpubench header, every
    record as wide as it (a cut, even inside a quoted field, is never data), a whole last line. A
    BOM and blank lines are skipped. The file is decoded as it is read: its records are typed a
    chunk at a time, never all held as text at once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # no link, FIFO or device; the size checked first
        self.data = read_regular(path, MAX_RESULTS_BYTES, "results file")
        if problem := not_csv_text(self.data):
            raise SchemaError(f"{path}: {problem}")
        self.text = io.TextIOWrapper(io.BytesIO(self.data), encoding="utf-8-sig", newline="")
        # a raw-samples cell may be as long as the file may be (csv's own limit is 128 KiB: 16,000
        # samples)
        csv.field_size_limit(max(csv.field_size_limit(), MAX_RESULTS_BYTES))
        self.reader = csv.reader(self.text)
        self.header = self._header()

    def _header(self) -> list[str]:
        header = self._next() or []
        # typed column by column: 20,000 columns of a few rows took a minute
        if len(header) > MAX_COLUMNS:
            raise SchemaError(
                f"{self.path}: the header names {len(header):,} columns, above the "
                f"{MAX_COLUMNS:,} a results file may have — not a gpubench results file; move it "
                "out of the folder"
            )
        missing = [c for c in REQUIRED_COLUMNS if c not in header]
        if missing:
            raise SchemaError(
                f"{self.path}: not a gpubench results file (missing columns: "
                f"{', '.join(missing[:5])})"
            )
        twice = next((c for i, c in enumerate(header) if c and c in header[:i]), None)
        # which of the two holds the figure? neither is trusted
        if twice is not None:
            first = header.index(twice)
            raise SchemaError(
                f"{self.path}: the header names column {twice} twice (columns {first + 1} and "
                f"{header.index(twice, first + 1) + 1}) — the file is damaged; keep one of them"
            )
        return header

    def _next(self) -> list[str] | None:
        try:
            return next(self.reader, None)
        except (UnicodeDecodeError, csv.Error) as error:
            raise SchemaError(f"{self.path}: not a readable CSV ({error})") from None

    def chunks(self, size: int) -> Iterator[tuple[list[list[str]], list[int]]]:
        """The records, `size` at a time, with csv.reader's line number at each one's end."""
        records: list[list[str]] = []
        lines: list[int] = []
        last = 0
        while (record := self._next()) is not None:
            # a blank line, or one of spaces, is no record
            if not any(field.strip() for field in record):
                continue
            last = self.reader.line_num
            if len(record) != len(self.header):
                fields = len(record)
                what = (
                    "is truncated"
                    if fields < len(self.header)
                    else f"has {fields} fields, the header {len(self.header)}"
                )
                raise SchemaError(
                    f"{self.path}: line {last} {what} — re-run the case or delete the line"
                )
            records.append(record)
            lines.append(last)
            if len(records) == size:
                yield records, lines
                records, lines = [], []
        if last and not ends_whole(self.data):
            raise SchemaError(
                f"{self.path}: line {last} is truncated (the file ends inside it) — "
                "re-run the case or delete the line"
            )
        if records:
            yield records, lines


def _upgraded(
    path: Path,
    header: list[str],
    records: list[list[str]],
    lines: list[int],
    renamed: dict[str, set[str]] | None = None,
) -> tuple[list[str], list[list[str]]]:
    """Older schema versions' records upgraded as text, row by row; a newer or non-numeric version
    is refused. A machine_id the upgrade replaced is kept in `renamed` (as written -> as read)."""
    at, current = header.index("schema_version"), str(SCHEMA_VERSION)
    if all(record[at] == current for record in records):
        return header, records
    rows = []
    for record, line in zip(records, lines):
        row = dict(zip(header, record))
        if record[at] != current:
            try:
                version = int(record[at])
            except ValueError:
                raise SchemaError(
                    f"{path}: line {line} has schema_version {record[at]!r} — not a gpubench row"
                ) from None
            written = row.get("machine_id", "")
            row = upgrade_row(row, version, str(path))
            if renamed is not None and row.get("machine_id", "") != written:
                renamed.setdefault(written, set()).add(row["machine_id"])
        rows.append(row)
    header = list(dict.fromkeys([*header, *(c for row in rows for c in row)]))
    return header, [[row.get(c, "") for c in header] for row in rows]


# ---- the cell rules in bulk ----------------------------------------------------------------------


def parse_numbers(text: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """The number columns of `text` ("" when empty) at once: (floats, NaN when empty; a mask of
    refused cells)."""
    import numpy as np
    import pandas as pd

    cells = text.to_numpy(dtype=object)
    # most columns of most rows are empty: only the others are looked at
    filled = cells != ""
    texts = cells[filled]
    number = (
        pd.Series(texts, dtype=object).str.fullmatch(NUMBER).to_numpy(dtype=bool)
        if texts.size
        else np.zeros(0, bool)
    )
    read = np.full(texts.shape, np.nan)
    read[number] = texts[number].astype(float)
    values = np.full(cells.shape, np.nan)
    values[filled] = read
    refused = np.zeros(cells.shape, dtype=bool)
    refused[filled] = ~number
    refused |= filled & _broken(list(text.columns), values)
    return pd.DataFrame(values, index=text.index, columns=text.columns), refused


def _broken(columns: list[str], values: np.ndarray) -> np.ndarray:
    """Where a number breaks one of its column's CHECKS: each check once over the whole block, kept
    where it applies (NaN breaks some, which the caller masks)."""
    import numpy as np

    checks = [CHECKS.get(column, ()) for column in columns]
    broken = np.zeros(values.shape, dtype=bool)
    # inf - inf, inf % 1: NaN, a broken rule
    with np.errstate(invalid="ignore"):
        for check in dict.fromkeys(check for own in checks for check in own):
            broken |= np.array([check in own for own in checks]) & check.broken(values)
    return broken


def shared_texts(text: pd.DataFrame) -> pd.DataFrame:
    """Text columns, None when empty and equal texts one object: a thousand runs' repeated strings
    take the memory of their distinct values."""
    import numpy as np
    import pandas as pd

    cells = text.to_numpy(dtype=object)
    codes, distinct = pd.factorize(cells.ravel())
    shared = np.asarray(distinct, dtype=object)[codes].reshape(cells.shape)
    shared[cells == ""] = None
    # object: pandas would infer its string dtype, NaN for None
    return pd.DataFrame(shared, index=text.index, columns=text.columns, dtype=object)


def parse_column(column: str, text: Any) -> tuple[Any, Any]:
    """parse_cell over a Series of a column that is not a number's: (values, refused mask). Booleans
    as True/False/None, text and JSON as text (None when empty); ruled text and JSON via parse_cell
    per distinct text."""
    empty = text == ""
    # nothing to read, no rule an empty cell breaks
    if empty.all() and column not in TEXT_RULES:
        return text.where(~empty, None), ~empty
    kind = kind_of(column)
    if kind == "bool":
        values = text[~empty].str.strip().str.lower().map(BOOL_WORDS).reindex(text.index)
        return values.astype(object).where(values.notna(), None), values.isna() & ~empty
    if kind in ("json", "object") or column in TEXT_RULES:
        distinct = text.unique().tolist()
        # raw samples: those surely in bounds judged at once (within), the rest cell by cell
        sure = within(column, distinct) if kind == "json" else [False] * len(distinct)
        verdicts = {t: not ok and _refused(column, t) for t, ok in zip(distinct, sure)}
        refused = text.map(verdicts).astype(bool)
    else:
        refused = empty & False
    return text.where(~empty, None), refused


def _refused(column: str, text: str) -> bool:
    try:
        parse_cell(column, text)
    except ValueError:
        return True
    return False


# Raw-samples cells judged at once: a thousand runs hold 200,000 distinct ones; parse_cell reads
# each in Python. json's grammar: no 01, .5, 1., +1, NaN
JSON_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
# the only white space json.loads skips
JSON_SPACE = r"[ \t\n\r]*"
FLAT_LIST = re.compile(
    rf"{JSON_SPACE}\[{JSON_SPACE}(?:{JSON_NUMBER}(?:{JSON_SPACE},{JSON_SPACE}{JSON_NUMBER})*)?"
    rf"{JSON_SPACE}\]{JSON_SPACE}"
)


def within(column: str, texts: list[str]) -> list[bool]:
    """Per text: True where surely a flat JSON list of numbers that break none of `column`'s CHECKS
    (empty too); one numpy parse for all. Answers only "surely accepted"; any other cell (damage,
    NaN, nesting, an odd space, a sample out of bounds) is left to parse_cell."""
    import numpy as np

    flat = [i for i, text in enumerate(texts) if FLAT_LIST.fullmatch(text)]
    inner = [texts[i].strip(" \t\n\r")[1:-1].strip(" \t\n\r") for i in flat]
    counts = np.array([text.count(",") + 1 if text else 0 for text in inner], dtype=np.int64)
    joined = ",".join(text for text in inner if text)
    values = np.fromstring(joined, dtype=float, sep=",") if counts.any() else np.zeros(0)
    verdict = [False] * len(texts)
    # the grammar above and numpy disagree on a cell: parse_cell decides all
    if len(values) != counts.sum():
        return verdict
    good = ~_broken([column], values[:, None])[:, 0]
    filled = counts > 0
    # an empty list is in bounds
    all_good = np.ones(len(flat), dtype=bool)
    if filled.any():
        starts = np.concatenate(([0], np.cumsum(counts[filled])[:-1]))
        all_good[filled] = np.logical_and.reduceat(good, starts)
    for i, ok in zip(flat, all_good.tolist()):
        verdict[i] = ok
    return verdict


class _Text:
    """Text records of several files under one header (the schema's columns, then others), typed
    together, numbers and texts each as one block; `refused` as read_frame's."""

    def __init__(self, refused: list[str] | None = None) -> None:
        self.header: list[str] = list(COLUMNS)
        # text records, and each one's file and line
        self.records, self.paths, self.lines = [], [], []
        self.files, self.refused, self.left_out = 0, refused, set()

    def add(
        self, path: Path, header: list[str], records: list[list[str]], lines: list[int]
    ) -> None:
        # another order, fewer or other columns: one header for all
        if header != self.header:
            known, where = set(self.header), {c: i for i, c in enumerate(header)}
            # _records refused a column named twice
            self.header += [c for c in header if c not in known]
            order = [where.get(c) for c in self.header]
            records = [[record[i] if i is not None else "" for i in order] for record in records]
        self.records.extend(records)
        self.paths.extend([path] * len(records))
        self.lines.extend(lines)

    def typed(self) -> pd.DataFrame:
        """Every column typed by the bulk rules above; the first refused cell names its file, line
        and column."""
        import pandas as pd

        width = len(self.header)
        rows = [r if len(r) == width else r + [""] * (width - len(r)) for r in self.records]
        text = pd.DataFrame(rows, columns=self.header, dtype=object)
        numbers, refused = parse_numbers(
            text[[c for c in self.header if kind_of(c) in ("int", "float")]]
        )
        for row, at in zip(*refused.nonzero()):
            self.refuse(numbers.columns[at], text[numbers.columns[at]].iloc[row], int(row))
        texts = shared_texts(text[[c for c in self.header if kind_of(c) == "str"]])
        typed = {**numbers, **texts}
        # columns with a rule to check
        for column in (
            c for c in self.header if c not in numbers and (c not in texts or c in TEXT_RULES)
        ):
            values, refused_cells = parse_column(column, text[column])
            for at in refused_cells.to_numpy().nonzero()[0]:
                self.refuse(column, text[column].iloc[at], int(at))
            typed.setdefault(column, values)
        frame = pd.DataFrame({c: typed[c] for c in self.header})
        return frame.assign(
            source_file=[p.stem for p in self.paths],
            source_path=[str(p) for p in self.paths],
            source_line=self.lines,
        ).drop(index=sorted(self.left_out))

    def refuse(self, column: str, cell: str, at: int) -> None:
        impossible, why = False, "refused by its column's rules"
        try:
            # parse_column refused it: the one-cell rule says why
            parse_cell(column, cell)
        except ValueError as error:
            impossible, why = isinstance(error, ImpossibleValue), str(error)
        if not impossible or self.refused is None:
            raise SchemaError(
                f"{self.paths[at]}: line {self.lines[at]}: column {column} holds {_quoted(cell)} "
                f"({why}) — the file is damaged; re-run the case or delete the line"
            )
        shown = _quoted(cell.strip())[1:-1]
        self.refused.append(
            f"{self.paths[at]}:{self.lines[at]}: column {column} = {shown} is impossible ({why})"
        )
        self.left_out.add(at)


def _quoted(cell: str, max_chars: int = 40) -> str:
    """A cell as a message quotes it: a 10,000-character cell would fill the line."""
    return repr(cell) if len(cell) <= max_chars else repr(cell[:max_chars]) + "…"


# files typed together
CHUNK_FILES = 100
# records typed together: a file's records are never all held as text (a 200 MB file's took 2 GB)
CHUNK_ROWS = 1000


def read_frame(
    paths: Path | Iterable[Path],
    refused: list[str] | None = None,
    renamed: dict[str, set[str]] | None = None,
) -> pd.DataFrame:
    """Every row of the CSVs `paths` as one frame, with `source_file` (stem), `source_path` and
    `source_line`. Damage is a SchemaError naming file, line and fix; so is an impossible value
    unless `refused` is given (the row is left out, named there). With `renamed`, each machine_id an
    older row was written with and the ones it reads as (a sidecar written beside the row names the
    machine as the row did: gpubench.reports.render.race). Typed a hundred files or
    CHUNK_ROWS records at a time: a thousand runs load in seconds, and a large file's text is never
    held whole."""
    import pandas as pd

    pending, frames = _Text(refused), []
    for path in map(Path, [paths] if isinstance(paths, (str, os.PathLike)) else paths):
        source, added = _Records(path), False
        for records, lines in source.chunks(CHUNK_ROWS):
            pending.add(path, *_upgraded(path, source.header, records, lines, renamed), lines)
            added = True
            if len(pending.records) >= CHUNK_ROWS:
                frames.append(pending.typed())
                pending = _Text(refused)
        # a file of a header alone still names its columns
        if not added:
            pending.add(path, source.header, [], [])
        pending.files += 1
        if pending.files >= CHUNK_FILES:
            frames.append(pending.typed())
            pending = _Text(refused)
    if pending.records or not frames:
        frames.append(pending.typed())
    frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    sources = ("source_file", "source_path", "source_line")
    ordered = [
        *COLUMNS,
        *(c for c in frame.columns if c not in BY_NAME and c not in sources),
        *sources,
    ]
    return frame.reindex(columns=ordered)


def _python(column: str, values: pd.Series) -> list[Any]:
    """A read frame's column as the writer's values: int, float, bool, list of samples, text or
    None."""
    kind, cells = kind_of(column), values.tolist()
    if kind in ("int", "float"):
        cast = int if kind == "int" else float
        return [None if v is None or v != v else cast(v) for v in cells]
    if kind in ("json", "object"):
        return [parse_cell(column, v) if isinstance(v, str) else None for v in cells]
    return [None if v is None or v != v else v for v in cells]


def frame_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A read frame's rows as dicts of the writer's Python values (see _python)."""
    columns = {c: _python(c, frame[c]) for c in frame.columns}
    return [dict(zip(columns, values)) for values in zip(*columns.values())]


def read_rows(path: Path) -> list[dict[str, Any]]:
    """One results CSV as read_frame's rows, each a dict of every column (None when empty)."""
    return frame_rows(
        read_frame([path]).drop(columns=["source_file", "source_path", "source_line"])
    )
