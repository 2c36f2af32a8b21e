"""Results files: one CSV per run, a row appended and flushed as each case finishes."""

from __future__ import annotations

import csv
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


class ResultsWriter:
    """Owns one run's CSV. Created exclusively (mode 'x'), so two runs never share a file; each
    row is flushed and fsynced before the next case starts, so a killed run keeps every finished
    case. `resume=True` appends to the run's file (a later build process of the same run, see
    `gpubench run`), after checking it was written with this schema."""

    def __init__(self, results_dir: Path, run_id: str, resume: bool = False) -> None:
        self.path = results_dir / f"{run_id}.csv"
        self.rows_written = 0
        if resume and self.path.exists():
            with open(self.path, newline="", encoding="utf-8") as existing:
                header = next(csv.reader(existing), [])
            if tuple(header) != COLUMNS:
                raise SchemaError(f"{self.path}: written by another gpubench version — use a new --run-id")
            self._file = open(self.path, "a", newline="", encoding="utf-8")
            self._writer = csv.DictWriter(self._file, fieldnames=COLUMNS, restval="")
        else:
            self._file = open(self.path, "x", newline="", encoding="utf-8")
            self._writer = csv.DictWriter(self._file, fieldnames=COLUMNS, restval="")
            self._writer.writeheader()
        self._sync()

    def append(self, row: dict[str, Any]) -> None:
        unknown = set(row) - set(COLUMNS)
        assert not unknown, f"columns missing from harness.schema: {sorted(unknown)}"
        assert row.get("status", "ok") in STATUSES, f"status {row.get('status')!r} is not one of {STATUSES}"
        self._writer.writerow({k: to_cell(v) for k, v in row.items()})
        self._sync()
        self.rows_written += 1

    def _sync(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


def write_sidecar(results_dir: Path, run_id: str, suffix: str, payload: Any) -> Path:
    """A JSON file beside the run's CSV (environment, profiler tables)."""
    path = results_dir / f"{run_id}.{suffix}.json"
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")
    return path


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Read a results CSV as typed rows (harness.schema), upgrading older schemas and refusing
    newer ones, files that are not gpubench results, and cut lines (SchemaError naming the file,
    the line and the fix). A line with fewer fields than the header — cut anywhere, even inside a
    quoted field — is never read as data."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
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
            return rows
    except (UnicodeDecodeError, csv.Error) as error:
        raise SchemaError(f"{path}: not a readable CSV ({error})") from None
