"""Results files: one CSV per run, a row appended and flushed as each case finishes."""

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
from typing import Any

from harness.schema import COLUMNS, REQUIRED_COLUMNS, STATUSES, SchemaError, to_cell, typed_row, upgrade_row


def new_run_id(now: datetime | None = None) -> str:
    """Sortable, unique per process: UTC time, host, pid and a random suffix."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    host = "".join(c if c.isalnum() or c in "-_" else "_" for c in socket.gethostname())[:24]
    return f"{stamp}-{host}-{os.getpid()}-{secrets.token_hex(2)}"


def utc_timestamp() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def check_writable(results_dir: Path) -> None:
    """Raise OSError with a one-line fix when results cannot be written there (before any case)."""
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
        probe = results_dir / f".gpubench-write-test-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        raise OSError(f"results directory {str(results_dir)!r} is not writable ({error.strerror or error}) — pass --results-dir DIR with a writable folder") from None


def _nearest_existing(path: Path) -> Path:
    """`path` itself or its closest ancestor that exists (a dangling link counts: it blocks mkdir)."""
    for candidate in (path, *path.parents):
        if candidate.exists() or candidate.is_symlink():
            return candidate
    return Path(path.anchor)


def check_results_dir_early(results_dir: Path) -> None:
    """The results folder can be created and written — checked when pytest starts, so a bad one is
    one line before pytest prints anything. Creates nothing that stays (pytest loads the plugin
    for every run in the checkout, most of which record nothing): only a probe file in the
    closest existing folder, removed at once. check_writable still runs before the first case."""
    existing = _nearest_existing(results_dir.absolute())
    try:
        if not existing.is_dir():
            raise OSError(errno.ENOTDIR, f"{existing} is not a folder")
        probe = existing / f".gpubench-write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        raise OSError(f"results directory {str(results_dir)!r} is not writable ({error.strerror or error}) — pass --results-dir DIR with a writable folder") from None


def check_output_file(path: Path, flag: str) -> None:
    """A file another plugin writes only after the whole run (pytest-benchmark's --benchmark-json)
    must be writable now: found at the end, it is a traceback after all the measuring. Creates
    nothing that stays."""
    fix = f"pass {flag} with a file in a writable folder"
    folder = path.parent
    if path.is_dir():
        raise OSError(f"{flag} {path} is a folder — {fix}")
    if not folder.is_dir():
        raise OSError(f"{flag} {path}: the folder {folder} does not exist — create it or {fix}")
    try:
        if path.exists():
            open(path, "ab").close()  # append mode: its contents stay as they are
        else:
            probe = folder / f".{path.name}.gpubench-write-test-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
    except OSError as error:
        raise OSError(f"{flag} {path} cannot be written ({error.strerror or error}) — {fix}") from None


# errnos that mean the folder's disk (or the user's quota) is full: the run stops, rows kept.
FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
MAX_RUN_ID_CHARS = 120  # <run_id>-report/, .ops.json and the like must stay under a file system's 255 bytes


class ResultsFull(OSError):
    """The results folder ran out of space: what was written is whole, and the run must stop.
    str() is the one line to show; `rows_kept` and `path` say what survived."""

    def __init__(self, rows_kept: int, path: Path, code: int = errno.ENOSPC, what: str = "") -> None:
        lost = f"; {what} not written" if what else ""
        super().__init__(f"results folder full: {rows_kept} rows kept in {path}{lost} — free space there or pass --results-dir on another disk, then re-run the missing cases")
        self.errno = code  # strerror stays None, so str() is the message above, without "[Errno 28]"
        self.rows_kept = rows_kept
        self.path = path


class RunIdError(ValueError):
    """A --run-id that cannot name a new file in the results folder."""


def check_run_id(run_id: str, results_dir: Path, appending: bool = False) -> str:
    """Refuse, before any case, a run id that would escape the results folder, overflow a file
    name, or overwrite another run (`appending`: a later build process of the same run, which
    adds to the file on purpose)."""
    fix = "pass another --run-id, or none for a fresh one"
    if not run_id or len(run_id) > MAX_RUN_ID_CHARS:
        raise RunIdError(f"--run-id is {len(run_id)} characters: use 1 to {MAX_RUN_ID_CHARS} — {fix}")
    separators = {"/", "\\", "\0", os.sep, os.altsep or "/"}
    if any(sep in run_id for sep in separators) or run_id in (".", "..") or run_id.startswith(".") or not run_id.isprintable():
        raise RunIdError(f"--run-id {run_id!r} must be a plain file name inside --results-dir (no path separators, no leading dot, no control characters) — {fix}")
    existing = results_dir / f"{run_id}.csv"
    if existing.exists() and not appending:
        raise RunIdError(f"--run-id {run_id!r} already exists ({existing}) — {fix}")
    return run_id


def _write_all(fd: int, data: bytes) -> None:
    """os.write may write part of the buffer (a full disk, a signal): loop until all of it is out."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


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
            with open(self.path, newline="", encoding="utf-8") as existing:
                header = next(csv.reader(existing), [])
            if tuple(header) != COLUMNS:
                raise SchemaError(f"{self.path}: written by another gpubench version — use a new --run-id")
            self._rows_before = count_rows(self.path)
            # Unbuffered: a failed write leaves nothing in a Python buffer to flush later.
            self._file = open(self.path, "ab", buffering=0)
        else:
            self._file = open(self.path, "xb", buffering=0)
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
            _write_all(fd, data)
            os.fsync(fd)
        except OSError as error:
            os.ftruncate(fd, offset)
            os.lseek(fd, offset, os.SEEK_SET)
            if error.errno in FULL_ERRNOS:
                raise ResultsFull(self.rows_kept, self.path, error.errno) from error
            raise

    def append(self, row: dict[str, Any]) -> None:
        unknown = set(row) - set(COLUMNS)
        assert not unknown, f"columns missing from harness.schema: {sorted(unknown)}"
        assert row.get("status", "ok") in STATUSES, f"status {row.get('status')!r} is not one of {STATUSES}"
        self._write_whole(self._encode(row))
        self.rows_written += 1

    def close(self) -> None:
        self._file.close()


def write_sidecar(results_dir: Path, run_id: str, suffix: str, payload: Any) -> Path:
    """A JSON file beside the run's CSV (environment, profiler tables), written under a temporary
    name and renamed: a full disk leaves the previous version, never half a file."""
    path = results_dir / f"{run_id}.{suffix}.json"
    data = (json.dumps(payload, indent=2, default=str) + "\n").encode("utf-8")
    partial = results_dir / f".{path.name}.partial-{os.getpid()}"
    try:
        with open(partial, "wb", buffering=0) as handle:
            _write_all(handle.fileno(), data)
            os.fsync(handle.fileno())
        os.replace(partial, path)
    except OSError as error:
        partial.unlink(missing_ok=True)
        if error.errno in FULL_ERRNOS:
            csv_path = results_dir / f"{run_id}.csv"
            raise ResultsFull(count_rows(csv_path), csv_path, error.errno, what=path.name) from error
        raise
    return path


def file_ends_whole(path: Path) -> bool:
    """Every row the writer writes ends in a newline: a file that does not was cut mid-row."""
    with open(path, "rb") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell() == 0:
            return True
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Read a results CSV as typed rows (harness.schema), upgrading older schemas and refusing
    newer ones, files that are not gpubench results, and cut lines (SchemaError naming the file,
    the line and the fix). A line with fewer fields than the header — cut anywhere, even inside a
    quoted field — is never read as data."""
    try:
        ends_whole = file_ends_whole(path)
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise SchemaError(f"{path}: not a gpubench results file (missing columns: {', '.join(missing[:5])})")
            rows = []
            for raw in reader:
                where = f"{path}: line {reader.line_num}"
                if None in raw or any(v is None for v in raw.values()):
                    raise SchemaError(f"{where} is truncated — re-run the case or delete the line")
                try:
                    version = int(raw["schema_version"])
                except ValueError:
                    raise SchemaError(f"{where} has schema_version {raw['schema_version']!r} — not a gpubench row") from None
                rows.append(typed_row(upgrade_row(raw, version, str(path)), where))
            if rows and not ends_whole:  # the last line was cut (inside a quoted field, say): not data
                raise SchemaError(f"{path}: line {reader.line_num} is truncated (the file ends inside it) — re-run the case or delete the line")
            return rows
    except (UnicodeDecodeError, csv.Error) as error:
        raise SchemaError(f"{path}: not a readable CSV ({error})") from None
