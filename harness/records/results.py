"""Results files: one CSV per run, a row appended and flushed as each case finishes, and its JSON
sidecars; run ids, checked before any case: `<run_id>.csv` must be a new plain file in the results
folder, not one the report writes, and a later build process may add only a build the file does not
hold yet."""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import secrets
import socket
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpubench.harness.core.exits import UsageError
from gpubench.harness.records.safe_files import (
    RefusedPath,
    link_line,
    make_folder,
    open_append,
    open_new,
    open_read,
    probe,
    replace_bytes,
    write_all,
)
from gpubench.harness.records.schema import COLUMNS, STATUSES, SchemaError, to_cell


def new_run_id(now: datetime | None = None) -> str:
    """Sortable, unique per process: UTC time, host, pid and a random suffix."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    host = "".join(c if c.isalnum() or c in "-_" else "_" for c in socket.gethostname())[:24]
    return f"{stamp}-{host}-{os.getpid()}-{secrets.token_hex(2)}"


def utc_timestamp() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# <run_id>-report/, .ops.json and the like must stay under a file system's 255 bytes
MAX_RUN_ID_CHARS = 120
# the same in UTF-8, with room for a sidecar's temporary name (60 emoji are 240 bytes)
MAX_RUN_ID_BYTES = 180
# `gpubench report` writes merged.csv and a folder's walk leaves it out: a run of that name would
# vanish.
RESERVED = ("merged",)
RUN_ID_FIX = "pass another --run-id, or none for a fresh one"


def check_run_id_text(run_id: str) -> str:
    """The rules on a run id's text alone, checked by `gpubench run` before a build and by the
    build's plugin."""
    if not run_id or len(run_id) > MAX_RUN_ID_CHARS:
        raise UsageError(
            f"--run-id is {len(run_id)} characters: use 1 to {MAX_RUN_ID_CHARS} — {RUN_ID_FIX}"
        )
    size = len(run_id.encode("utf-8", "surrogatepass"))
    if size > MAX_RUN_ID_BYTES:
        raise UsageError(
            f"--run-id is {size} bytes in UTF-8: use at most {MAX_RUN_ID_BYTES} "
            f"(a file name holds 255, and its sidecars add to it) — {RUN_ID_FIX}"
        )
    separators = {"/", "\\", "\0", os.sep, os.altsep or "/"}
    plain = not (
        any(sep in run_id for sep in separators) or run_id.startswith(".") or run_id in (".", "..")
    )
    if not plain or not run_id.isprintable():
        raise UsageError(
            f"--run-id {run_id!r} must be a plain file name inside --results-dir (no path "
            f"separators, no leading dot, no control characters) — {RUN_ID_FIX}"
        )
    # any case: a case-insensitive file system makes MERGED.csv merged.csv
    if run_id.lower() in RESERVED:
        raise UsageError(
            f"--run-id {run_id!r} is the name of the report's merged.csv (a folder's report would "
            f"leave the run out) — {RUN_ID_FIX}"
        )
    return run_id


def check_run_id(
    run_id: str, results_dir: Path, appending: bool = False, build: int | None = None
) -> str:
    """Refuses a run id that would escape the folder, overflow a name, take the report's or
    overwrite another run (`appending`: a later build process adds to the file on purpose, unless it
    holds `build`)."""
    check_run_id_text(run_id)
    existing = results_dir / f"{run_id}.csv"
    # dangling or not: never written through, and not "another run's file"
    if existing.is_symlink():
        raise UsageError(
            f"{existing} is a symbolic link (to {os.readlink(existing)}), not a results file — "
            f"remove it or {RUN_ID_FIX}"
        )
    if existing.exists() and not appending:
        raise UsageError(f"--run-id {run_id!r} already exists ({existing}) — {RUN_ID_FIX}")
    rows = (
        rows_of_build(existing, build)
        if appending and build is not None and existing.is_file()
        else 0
    )
    # a second copy of a build would make the report refuse the run ("twice with different figures")
    if rows:
        raise UsageError(
            f"{existing} already holds build {build} ({rows} rows): each build of a run is "
            f"measured once — {RUN_ID_FIX}"
        )
    return run_id


def rows_of_build(path: Path, build: int) -> int:
    """The rows of `path` holding `build`; 0 without the column or as CSV unreadable (the writer
    refuses it)."""
    try:
        raw = open_read(path, "results file", RUN_ID_FIX)
        with io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as handle:
            reader = csv.reader(handle)
            header = next(reader, [])
            if "build" not in header:
                return 0
            at = header.index("build")
            return sum(1 for record in reader if len(record) > at and _int(record[at]) == build)
    except (OSError, UnicodeDecodeError, csv.Error):
        return 0


def _int(cell: str) -> int | None:
    try:
        return int(float(cell))
    # not a number, or inf: no build of ours
    except (ValueError, OverflowError):
        return None


RESULTS_DIR = "results directory"
# the fix for a link where a results file or folder goes
RESULTS_FIX = "pass --results-dir with the folder itself"


def check_writable(results_dir: Path) -> None:
    """OSError with a one-line fix when results cannot be written there (a link is refused), before
    any case."""
    try:
        make_folder(results_dir, RESULTS_DIR, RESULTS_FIX)
        probe(results_dir, RESULTS_DIR, RESULTS_FIX)
    except RefusedPath:
        raise
    except OSError as error:
        raise _not_writable(results_dir, error) from None


def _not_writable(results_dir: Path, error: OSError) -> OSError:
    return OSError(
        f"results directory {str(results_dir)!r} is not writable ({error.strerror or error}) — "
        "pass --results-dir DIR (or --store STORE) with a writable folder"
    )


def _nearest_existing(path: Path) -> Path:
    """`path` itself or its closest ancestor that exists (a dangling link counts: it blocks
    mkdir)."""
    for candidate in (path, *path.parents):
        if candidate.exists() or candidate.is_symlink():
            return candidate
    return Path(path.anchor)


def check_results_dir_early(results_dir: Path) -> None:
    """The results folder can be made and written, checked as pytest starts, without creating
    anything: most runs in the checkout record nothing, and the nearest existing folder may be
    shared (/tmp). The kernel is asked."""
    if results_dir.is_symlink():
        raise RefusedPath(link_line(results_dir, RESULTS_DIR, RESULTS_FIX))
    existing = _nearest_existing(results_dir.absolute())
    try:
        if not existing.is_dir():
            raise OSError(errno.ENOTDIR, f"{existing} is not a folder")
        # read-only mounts too, even for root
        if not os.access(existing, os.W_OK | os.X_OK):
            raise OSError(errno.EACCES, "permission denied")
    except OSError as error:
        raise _not_writable(results_dir, error) from None


def check_output_file(path: Path, flag: str) -> None:
    """A file another plugin writes after the run (--benchmark-json) must be writable now, not a
    traceback after all the measuring. Creates nothing that stays, never writes through a link."""
    fix = f"pass {flag} with a file in a writable folder"
    folder = path.parent
    if path.is_dir():
        raise OSError(f"{flag} {path} is a folder — {fix}")
    if not folder.is_dir():
        raise OSError(f"{flag} {path}: the folder {folder} does not exist — create it or {fix}")
    try:
        # its contents stay as they are
        if path.exists() and not os.access(path, os.W_OK):
            raise OSError(errno.EACCES, "permission denied")
        # a random name with O_EXCL: no link planted at a guessed name is followed
        probe(folder, flag, fix)
    except OSError as error:
        raise OSError(
            f"{flag} {path} cannot be written ({error.strerror or error}) — {fix}"
        ) from None


# errnos that mean the folder's disk (or the user's quota) is full: the run stops, rows kept.
# EFBIG: the file may not grow (ulimit -f)
FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class ResultsFull(OSError):
    """The results folder is full: what was written is whole and the run must stop; str() is the
    line to show."""

    def __init__(
        self, rows_kept: int, path: Path, code: int = errno.ENOSPC, what: str = ""
    ) -> None:
        lost = f"; {what} not written" if what else ""
        super().__init__(
            f"results folder full: {rows_kept} rows kept in {path}{lost} — free space there or "
            "pass --results-dir (or --store) on another disk, then re-run the missing cases"
        )
        # strerror stays None, so str() is the message above, without "[Errno 28]"
        self.errno = code
        self.rows_kept = rows_kept
        self.path = path


def count_rows(path: Path) -> int:
    """Whole records in a results CSV (a quoted field may hold a newline), header excluded."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            return max(0, sum(1 for _ in csv.reader(handle)) - 1)
    except (OSError, UnicodeDecodeError, csv.Error):
        return 0


def row_statuses(path: Path) -> Counter[str]:
    """How many rows of a results CSV hold each status; none when it has no status column or cannot
    be read."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            return (
                Counter(row.get("status") or "" for row in reader)
                if "status" in (reader.fieldnames or [])
                else Counter()
            )
    except (OSError, UnicodeDecodeError, csv.Error):
        return Counter()


class ResultsWriter:
    """One run's CSV, created exclusively; each row written whole and fsynced before the next case,
    so a killed run keeps every finished case. A row the full disk cannot take is cut back off and
    ResultsFull stops the run. `resume=True` appends (a later build process of the run) after
    checking the header is this schema's."""

    def __init__(self, results_dir: Path, run_id: str, resume: bool = False) -> None:
        self.path = results_dir / f"{run_id}.csv"
        self.rows_written = 0
        # rows an earlier build process left in the file
        self._rows_before = 0
        if resume and self.path.exists():
            raw = open_read(self.path, "results file", RESULTS_FIX)
            with io.TextIOWrapper(raw, encoding="utf-8", newline="") as existing:
                header = next(csv.reader(existing), [])
            if tuple(header) != COLUMNS:
                raise SchemaError(
                    f"{self.path}: written by another gpubench version — use a new --run-id"
                )
            self._rows_before = count_rows(self.path)
            # Unbuffered: a failed write leaves nothing in a Python buffer to flush later.
            self._file = os.fdopen(
                open_append(self.path, "results file", RESULTS_FIX), "ab", buffering=0
            )
        # O_EXCL|O_NOFOLLOW: two runs never share a file, and a link there is refused, not followed
        else:
            self._file = os.fdopen(
                open_new(self.path, "results file", RESULTS_FIX), "wb", buffering=0
            )
            try:
                self._write_whole(self._encode(None))
            except ResultsFull:
                self._file.close()
                # a file without its header is no results file
                self.path.unlink(missing_ok=True)
                raise

    @property
    def rows_kept(self) -> int:
        """Rows in the file, including an earlier build process's."""
        return self._rows_before + self.rows_written

    @staticmethod
    def _encode(row: dict[str, Any] | None) -> bytes:
        """One whole CSV record (or the header when row is None), formatted before any byte is
        written."""
        text = io.StringIO(newline="")
        writer = csv.DictWriter(text, fieldnames=COLUMNS, restval="")
        if row is None:
            writer.writeheader()
        else:
            writer.writerow({k: to_cell(v) for k, v in row.items()})
        return text.getvalue().encode("utf-8")

    def _write_whole(self, data: bytes) -> None:
        """Write and fsync `data`, or on an OSError truncate back to the offset before it."""
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
        assert not unknown, (
            f"columns missing from gpubench.harness.records.schema: {sorted(unknown)}"
        )
        assert row.get("status", "ok") in STATUSES, (
            f"status {row.get('status')!r} is not one of {STATUSES}"
        )
        self._write_whole(self._encode(row))
        self.rows_written += 1

    def close(self) -> None:
        self._file.close()


def write_sidecar(results_dir: Path, run_id: str, suffix: str, payload: Any) -> Path:
    """A JSON file beside the run's CSV, written to a temporary and renamed: a full disk leaves the
    previous version, never half a file, and a link planted at either name is never followed."""
    path = results_dir / f"{run_id}.{suffix}.json"
    data = (json.dumps(payload, indent=2, default=str) + "\n").encode("utf-8")
    try:
        replace_bytes(results_dir, path.name, data, RESULTS_DIR, RESULTS_FIX)
    except OSError as error:
        if error.errno in FULL_ERRNOS:
            csv_path = results_dir / f"{run_id}.csv"
            raise ResultsFull(
                count_rows(csv_path), csv_path, error.errno, what=path.name
            ) from error
        raise
    return path
