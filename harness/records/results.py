"""Results files: one CSV per run, a row appended and flushed as each case finishes; read_frame is
the one reader of them (read_rows for the harness, gpubench.reports.load for the report commands)."""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import secrets
import socket
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any
from collections.abc import Iterable

from gpubench.harness.records.column_rules import is_number_column, parse_column, parse_numbers, shared_texts
from gpubench.harness.records.run_ids import MAX_RUN_ID_CHARS, RunIdError, check_run_id  # noqa: F401 - the run's file's name, checked
from gpubench.harness.records.safe_files import (UnsafePath, link_line, make_folder, open_append, open_new, open_read, probe, read_regular,
                                replace_bytes, replacing, write_all)
from gpubench.harness.records.schema import (BY_NAME, COLUMNS, REQUIRED_COLUMNS, SCHEMA_VERSION, STATUSES, TEXT_RULES, ImpossibleValue,
                                    SchemaError, kind_of, parse_cell, to_cell)
from gpubench.harness.records.upgrade import upgrade_row

if TYPE_CHECKING:
    import pandas as pd  # imported where a file is read: the harness writes far more often than it reads


def new_run_id(now: datetime | None = None) -> str:
    """Sortable, unique per process: UTC time, host, pid and a random suffix."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    host = "".join(c if c.isalnum() or c in "-_" else "_" for c in socket.gethostname())[:24]
    return f"{stamp}-{host}-{os.getpid()}-{secrets.token_hex(2)}"


def utc_timestamp() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


RESULTS_DIR = "results directory"
RESULTS_FIX = "pass --results-dir with the folder itself"  # the fix for a link where a results file or folder goes


def check_writable(results_dir: Path) -> None:
    """Raise OSError with a one-line fix when results cannot be written there (before any case):
    a folder that is a link is refused; the probe is a random name made inside the folder."""
    try:
        make_folder(results_dir, RESULTS_DIR, RESULTS_FIX)
        probe(results_dir, RESULTS_DIR, RESULTS_FIX)
    except UnsafePath:
        raise
    except OSError as error:
        raise OSError(f"results directory {str(results_dir)!r} is not writable ({error.strerror or error}) — pass --results-dir DIR (or --store STORE) "
                      f"with a writable folder") from None


def _nearest_existing(path: Path) -> Path:
    """`path` itself or its closest ancestor that exists (a dangling link counts: it blocks mkdir)."""
    for candidate in (path, *path.parents):
        if candidate.exists() or candidate.is_symlink():
            return candidate
    return Path(path.anchor)


def check_results_dir_early(results_dir: Path) -> None:
    """The results folder can be created and written — checked when pytest starts, so a bad one is
    one line before pytest prints anything. Creates nothing (pytest loads the plugin for every run
    in the checkout, most of which record nothing; and the closest existing folder may be a shared
    one such as /tmp): asks the kernel instead. check_writable still runs before the first case."""
    if results_dir.is_symlink():
        raise UnsafePath(link_line(results_dir, RESULTS_DIR, RESULTS_FIX))
    existing = _nearest_existing(results_dir.absolute())
    try:
        if not existing.is_dir():
            raise OSError(errno.ENOTDIR, f"{existing} is not a folder")
        if not os.access(existing, os.W_OK | os.X_OK):  # read-only mounts too, even for root
            raise OSError(errno.EACCES, "permission denied")
    except OSError as error:
        raise OSError(f"results directory {str(results_dir)!r} is not writable ({error.strerror or error}) — pass --results-dir DIR (or --store STORE) "
                      f"with a writable folder") from None


def check_output_file(path: Path, flag: str) -> None:
    """A file another plugin writes only after the whole run (pytest-benchmark's --benchmark-json)
    must be writable now: found at the end, it is a traceback after all the measuring. Creates
    nothing that stays, and never writes through a link."""
    fix = f"pass {flag} with a file in a writable folder"
    folder = path.parent
    if path.is_dir():
        raise OSError(f"{flag} {path} is a folder — {fix}")
    if not folder.is_dir():
        raise OSError(f"{flag} {path}: the folder {folder} does not exist — create it or {fix}")
    try:
        if path.exists() and not os.access(path, os.W_OK):  # its contents stay as they are
            raise OSError(errno.EACCES, "permission denied")
        probe(folder, flag, fix)  # a random name with O_EXCL: no link planted at a guessed name is followed
    except OSError as error:
        raise OSError(f"{flag} {path} cannot be written ({error.strerror or error}) — {fix}") from None


# errnos that mean the folder's disk (or the user's quota) is full: the run stops, rows kept.
FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # EFBIG: the file may not grow (ulimit -f)


class ResultsFull(OSError):
    """The results folder ran out of space: what was written is whole, and the run must stop.
    str() is the one line to show; `rows_kept` and `path` say what survived."""

    def __init__(self, rows_kept: int, path: Path, code: int = errno.ENOSPC, what: str = "") -> None:
        lost = f"; {what} not written" if what else ""
        super().__init__(f"results folder full: {rows_kept} rows kept in {path}{lost} — free space there or pass --results-dir (or --store) on another "
                         f"disk, then re-run the missing cases")
        self.errno = code  # strerror stays None, so str() is the message above, without "[Errno 28]"
        self.rows_kept = rows_kept
        self.path = path


def count_rows(path: Path) -> int:
    """Whole records in a results CSV (a quoted field may hold a newline), header excluded."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            return max(0, sum(1 for _ in csv.reader(handle)) - 1)
    except (OSError, UnicodeDecodeError, csv.Error):
        return 0


class ResultsWriter:
    """Owns one run's CSV. Created exclusively, so two runs never share a file; each row is
    written whole and fsynced before the next case starts, so a killed run keeps every finished
    case. A row the disk cannot take (ENOSPC) is cut back off, leaving only whole rows, and
    ResultsFull stops the run. `resume=True` appends to the run's file (a later build process of
    the same run, see `gpubench run`), after checking it was written with this schema."""

    def __init__(self, results_dir: Path, run_id: str, resume: bool = False) -> None:
        self.path = results_dir / f"{run_id}.csv"
        self.rows_written = 0
        self._rows_before = 0  # rows an earlier build process left in the file
        if resume and self.path.exists():
            with io.TextIOWrapper(open_read(self.path, "results file", RESULTS_FIX), encoding="utf-8", newline="") as existing:
                header = next(csv.reader(existing), [])
            if tuple(header) != COLUMNS:
                raise SchemaError(f"{self.path}: written by another gpubench version — use a new --run-id")
            self._rows_before = count_rows(self.path)
            # Unbuffered: a failed write leaves nothing in a Python buffer to flush later.
            self._file = os.fdopen(open_append(self.path, "results file", RESULTS_FIX), "ab", buffering=0)
        else:  # O_EXCL|O_NOFOLLOW: two runs never share a file, and a link there is refused, not followed
            self._file = os.fdopen(open_new(self.path, "results file", RESULTS_FIX), "wb", buffering=0)
            try:
                self._write_whole(self._encode(None))
            except ResultsFull:
                self._file.close()
                self.path.unlink(missing_ok=True)  # a file without its header is no results file
                raise

    @property
    def rows_kept(self) -> int:
        """Rows in the file, including an earlier build process's."""
        return self._rows_before + self.rows_written

    @staticmethod
    def _encode(row: dict[str, Any] | None) -> bytes:
        """One whole CSV record (or the header when row is None), formatted before any byte is written."""
        text = io.StringIO(newline="")
        writer = csv.DictWriter(text, fieldnames=COLUMNS, restval="")
        if row is None:
            writer.writeheader()
        else:
            writer.writerow({k: to_cell(v) for k, v in row.items()})
        return text.getvalue().encode("utf-8")

    def _write_whole(self, data: bytes) -> None:
        """Write and fsync `data`, or leave the file as it was: on an OSError the part that made it
        to disk is cut back off (truncate to the offset before the write)."""
        fd = self._file.fileno()
        offset = os.lseek(fd, 0, os.SEEK_END)
        try:
            write_all(fd, data)
            os.fsync(fd)
        except OSError as error:
            os.ftruncate(fd, offset)
            os.lseek(fd, offset, os.SEEK_SET)
            if error.errno in FULL_ERRNOS:
                raise ResultsFull(self.rows_kept, self.path, error.errno) from error
            raise

    def append(self, row: dict[str, Any]) -> None:
        unknown = set(row) - set(COLUMNS)
        assert not unknown, f"columns missing from gpubench.harness.records.schema: {sorted(unknown)}"
        assert row.get("status", "ok") in STATUSES, f"status {row.get('status')!r} is not one of {STATUSES}"
        self._write_whole(self._encode(row))
        self.rows_written += 1

    def close(self) -> None:
        self._file.close()


def write_sidecar(results_dir: Path, run_id: str, suffix: str, payload: Any) -> Path:
    """A JSON file beside the run's CSV (environment, profiler tables), written under a random
    temporary name inside the results folder and renamed (gpubench.harness.records.safe_files): a full disk leaves
    the previous version, never half a file, and a link planted at either name is never followed."""
    path = results_dir / f"{run_id}.{suffix}.json"
    data = (json.dumps(payload, indent=2, default=str) + "\n").encode("utf-8")
    try:
        replace_bytes(results_dir, path.name, data, RESULTS_DIR, RESULTS_FIX)
    except OSError as error:
        if error.errno in FULL_ERRNOS:
            csv_path = results_dir / f"{run_id}.csv"
            raise ResultsFull(count_rows(csv_path), csv_path, error.errno, what=path.name) from error
        raise
    return path


def ends_whole(data: bytes) -> bool:
    """Every row the writer writes ends in a newline: a file that does not (spaces after the last
    one aside: an editor's blank line) was cut mid-row."""
    tail = data[-4096:].rstrip(b" \t\r\f\v")
    return not tail or tail.endswith(b"\n")


MAX_RESULTS_BYTES = 256 * 2**20  # 100 times a long run's file: a larger one is a stray, left unread
MAX_COLUMNS = 1000  # 7 times the schema's: room for newer writers' columns, none for a stray of thousands


# ---- reading: the one reader of results CSVs (harness and reports) ---------------------------------

def _records(path: Path) -> tuple[list[str], list[list[str]], list[int]]:
    """The header, records and line numbers of one results CSV, checked: a gpubench header, as
    many fields in each record as in the header (one cut anywhere, even inside a quoted field,
    is never data), a last line that ends. A byte-order mark and blank lines are skipped."""
    records, lines = [], []  # lines: csv.reader's line number at each record's end
    data = read_regular(path, MAX_RESULTS_BYTES, "results file")  # no link, FIFO or device; the size checked first
    try:
        reader = csv.reader(io.StringIO(data.decode("utf-8-sig"), newline=""))
        header = next(reader, [])
        if len(header) > MAX_COLUMNS:  # typed column by column: 20,000 columns of a few rows took a minute
            raise SchemaError(f"{path}: the header names {len(header):,} columns, above the {MAX_COLUMNS:,} a results "
                              "file may have — not a gpubench results file; move it out of the folder")
        for record in reader:
            if any(field.strip() for field in record):  # a blank line, or one of spaces (an editor's), is no record
                records.append(record)
                lines.append(reader.line_num)
    except (UnicodeDecodeError, csv.Error) as error:
        raise SchemaError(f"{path}: not a readable CSV ({error})") from None
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise SchemaError(f"{path}: not a gpubench results file (missing columns: {', '.join(missing[:5])})")
    twice = next((c for i, c in enumerate(header) if c and c in header[:i]), None)
    if twice is not None:  # which of the two holds the figure? neither is trusted
        first = header.index(twice)
        raise SchemaError(f"{path}: the header names column {twice} twice (columns {first + 1} and "
                          f"{header.index(twice, first + 1) + 1}) — the file is damaged; keep one of them")
    odd = next((i for i, record in enumerate(records) if len(record) != len(header)), None)
    if odd is not None:
        fields = len(records[odd])
        what = "is truncated" if fields < len(header) else f"has {fields} fields, the header {len(header)}"
        raise SchemaError(f"{path}: line {lines[odd]} {what} — re-run the case or delete the line")
    if records and not ends_whole(data):
        raise SchemaError(f"{path}: line {lines[-1]} is truncated (the file ends inside it) — re-run the case or delete the line")
    return header, records, lines


def _upgraded(path: Path, header: list[str], records: list[list[str]], lines: list[int]) -> tuple[list[str], list[list[str]]]:
    """Records of older schema versions brought up to this one as text (gpubench.harness.records.upgrade.upgrade_row,
    row by row); a newer version or one that is no number is refused. Current ones pass as they are."""
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
                raise SchemaError(f"{path}: line {line} has schema_version {record[at]!r} — not a gpubench row") from None
            row = upgrade_row(row, version, str(path))
        rows.append(row)
    header = list(dict.fromkeys([*header, *(c for row in rows for c in row)]))
    return header, [[row.get(c, "") for c in header] for row in rows]


class _Text:
    """Text records of several files under one header (the schema's columns, then any other a
    file has), typed together: numbers and texts each as one block, bounded text in memory; `refused` as read_frame's."""

    def __init__(self, refused: list[str] | None = None) -> None:
        self.header: list[str] = list(COLUMNS)
        self.records, self.paths, self.lines = [], [], []  # text records, and each one's file and line
        self.files, self.refused, self.left_out = 0, refused, set()

    def add(self, path: Path, header: list[str], records: list[list[str]], lines: list[int]) -> None:
        if header != self.header:  # another order, fewer or other columns: one header for all
            known, where = set(self.header), {c: i for i, c in enumerate(header)}
            self.header += [c for c in header if c not in known]  # _records refused a column named twice
            order = [where.get(c) for c in self.header]
            records = [[record[i] if i is not None else "" for i in order] for record in records]
        self.records.extend(records)
        self.paths.extend([path] * len(records))
        self.lines.extend(lines)
        self.files += 1

    def typed(self) -> pd.DataFrame:
        """Every column typed by gpubench.harness.records.column_rules; the first refused cell names its file, line and column."""
        import pandas as pd

        width = len(self.header)
        rows = [r if len(r) == width else r + [""] * (width - len(r)) for r in self.records]
        text = pd.DataFrame(rows, columns=self.header, dtype=object)
        numbers, refused = parse_numbers(text[[c for c in self.header if is_number_column(c)]])
        for row, at in zip(*refused.nonzero()):
            self.refuse(numbers.columns[at], text[numbers.columns[at]].iloc[row], int(row))
        texts = shared_texts(text[[c for c in self.header if kind_of(c) == "str"]])
        typed = {**numbers, **texts}
        for column in (c for c in self.header if c not in numbers and (c not in texts or c in TEXT_RULES)):  # a rule to check
            values, refused_cells = parse_column(column, text[column])
            for at in refused_cells.to_numpy().nonzero()[0]:
                self.refuse(column, text[column].iloc[at], int(at))
            typed.setdefault(column, values)
        return pd.DataFrame({c: typed[c] for c in self.header}).assign(source_file=[p.stem for p in self.paths],
                                                                        source_line=self.lines).drop(index=sorted(self.left_out))

    def refuse(self, column: str, cell: str, at: int) -> None:
        impossible, why = False, "refused by its column's rules"
        try:
            parse_cell(column, cell)  # parse_column refused it: the one-cell rule says why
        except ValueError as error:
            impossible, why = isinstance(error, ImpossibleValue), str(error)
        if not impossible or self.refused is None:
            raise SchemaError(f"{self.paths[at]}: line {self.lines[at]}: column {column} holds {_quoted(cell)} "
                              f"({why}) — the file is damaged; re-run the case or delete the line")
        shown = _quoted(cell.strip())[1:-1]
        self.refused.append(f"{self.paths[at]}:{self.lines[at]}: column {column} = {shown} is impossible ({why})")
        self.left_out.add(at)


def _quoted(cell: str, max_chars: int = 40) -> str:
    """A cell as a message quotes it: a 10,000-character cell would fill the line."""
    return repr(cell) if len(cell) <= max_chars else repr(cell[:max_chars]) + "…"


CHUNK_FILES = 100  # files typed together


def read_frame(paths: Path | Iterable[Path], refused: list[str] | None = None) -> pd.DataFrame:
    """Every row of the results CSVs `paths` as one frame: the schema's columns, any other a file has (as
    text), `source_file` (the file's stem) and `source_line`. Typed by gpubench.harness.records.column_rules (numbers as
    floats, NaN when empty; booleans and text as True/False/str/None; `samples_s` as its JSON text); older
    schemas upgraded row by row, newer ones refused. A file that is not gpubench results, a cut line, a wrong
    field count or a damaged cell is a SchemaError naming the file, the line and the fix; so is an impossible
    value, unless `refused` is given: its row is then left out and named there. Typed column by column, a
    hundred files at once: a thousand runs load in seconds."""
    import pandas as pd

    pending, frames = _Text(refused), []
    for path in map(Path, [paths] if isinstance(paths, (str, os.PathLike)) else paths):
        header, records, lines = _records(path)
        pending.add(path, *_upgraded(path, header, records, lines), lines)
        if pending.files == CHUNK_FILES:
            frames.append(pending.typed())
            pending = _Text(refused)
    if pending.records or not frames:
        frames.append(pending.typed())
    frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    ordered = [*COLUMNS, *(c for c in frame.columns if c not in BY_NAME and c not in ("source_file", "source_line")), "source_file", "source_line"]
    return frame.reindex(columns=ordered)


def _python(column: str, values: pd.Series) -> list[Any]:
    """A read frame's column as the writer's values: int, float, bool, list of samples, text or None."""
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
    """One results CSV as typed rows: read_frame's rows (the same checks, upgrades and refusals),
    each a dict of every schema column (None when empty) and any other column the file has."""
    return frame_rows(read_frame([path]).drop(columns=["source_file", "source_line"]))


def write_frame(frame: pd.DataFrame, path: Path, columns: list[str], fix: str = "pass another output folder") -> None:
    """`columns` of a read frame as one results CSV, every cell as ResultsWriter writes it; whole or
    not at all, never through a link (gpubench.harness.records.safe_files.replacing)."""
    with replacing(path.parent, path.name, "output folder", fix, text=True) as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for start in range(0, len(frame), 4096):  # bounded memory: a few thousand rows of text at a time
            part = frame.iloc[start:start + 4096]
            writer.writerows(zip(*([to_cell(v) for v in _python(c, part[c])] for c in columns)))
