"""Run ids, checked before any case: `<run_id>.csv` must be a new plain file in the results folder, not one the report
writes, and a later build process may add only a build the file does not hold yet."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

from gpubench.harness.records.safe_files import UnsafePath, open_read
from gpubench.harness.core.exits import UsageError

MAX_RUN_ID_CHARS = 120  # <run_id>-report/, .ops.json and the like must stay under a file system's 255 bytes
MAX_RUN_ID_BYTES = 180  # the same in UTF-8, with room for a sidecar's temporary name (60 emoji are 240 bytes)
# `gpubench report` writes merged.csv and a folder's walk leaves it out: a run of that name would vanish.
RESERVED = ("merged",)
FIX = "pass another --run-id, or none for a fresh one"


def check_run_id_text(run_id: str) -> str:
    """The rules on a run id's text alone, checked by `gpubench run` before a build and by the build's plugin."""
    if not run_id or len(run_id) > MAX_RUN_ID_CHARS:
        raise UsageError(f"--run-id is {len(run_id)} characters: use 1 to {MAX_RUN_ID_CHARS} — {FIX}")
    size = len(run_id.encode("utf-8", "surrogatepass"))
    if size > MAX_RUN_ID_BYTES:
        raise UsageError(f"--run-id is {size} bytes in UTF-8: use at most {MAX_RUN_ID_BYTES} "
                         f"(a file name holds 255, and its sidecars add to it) — {FIX}")
    separators = {"/", "\\", "\0", os.sep, os.altsep or "/"}
    plain = not (any(sep in run_id for sep in separators) or run_id.startswith(".") or run_id in (".", ".."))
    if not plain or not run_id.isprintable():
        raise UsageError(f"--run-id {run_id!r} must be a plain file name inside --results-dir (no path separators, "
                         f"no leading dot, no control characters) — {FIX}")
    if run_id.lower() in RESERVED:  # any case: a case-insensitive file system makes MERGED.csv merged.csv
        raise UsageError(f"--run-id {run_id!r} is the name of the report's merged.csv (a folder's report would leave "
                         f"the run out) — {FIX}")
    return run_id


def check_run_id(run_id: str, results_dir: Path, appending: bool = False, build: int | None = None) -> str:
    """Refuses a run id that would escape the folder, overflow a name, take the report's or overwrite another run
    (`appending`: a later build process adds to the file on purpose, unless it holds `build`)."""
    check_run_id_text(run_id)
    existing = results_dir / f"{run_id}.csv"
    if existing.is_symlink():  # dangling or not: never written through, and not "another run's file"
        raise UsageError(f"{existing} is a symbolic link (to {os.readlink(existing)}), not a results file — "
                         f"remove it or {FIX}")
    if existing.exists() and not appending:
        raise UsageError(f"--run-id {run_id!r} already exists ({existing}) — {FIX}")
    rows = rows_of_build(existing, build) if appending and build is not None and existing.is_file() else 0
    if rows:  # a second copy of a build would make the report refuse the run ("twice with different figures")
        raise UsageError(f"{existing} already holds build {build} ({rows} rows): each build of a run is measured "
                         f"once — {FIX}")
    return run_id


def rows_of_build(path: Path, build: int) -> int:
    """The rows of `path` holding `build`; 0 without the column or as CSV unreadable (the writer refuses it)."""
    try:
        raw = open_read(path, "results file", FIX)
        with io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as handle:
            reader = csv.reader(handle)
            header = next(reader, [])
            if "build" not in header:
                return 0
            at = header.index("build")
            return sum(1 for record in reader if len(record) > at and _int(record[at]) == build)
    except (OSError, UnsafePath, UnicodeDecodeError, csv.Error):
        return 0


def _int(cell: str) -> int | None:
    try:
        return int(float(cell))
    except ValueError:
        return None
