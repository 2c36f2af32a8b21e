"""Results files: one CSV per run, a row appended and flushed as each case finishes, and its JSON
sidecars; gpubench.harness.records.results_reader is the one reader of them."""

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

from gpubench.harness.records.run_ids import MAX_RUN_ID_CHARS, RunIdError, check_run_id  # noqa: F401 - the run's file's name, checked
from gpubench.harness.records.safe_files import (UnsafePath, link_line, make_folder, open_append, open_new, open_read, probe, replace_bytes, write_all)
from gpubench.harness.records.schema import (COLUMNS, STATUSES, SchemaError, to_cell)

if TYPE_CHECKING:
    pass  # imported where a file is read: the harness writes far more often than it reads


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
