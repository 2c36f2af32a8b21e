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

from harness.schema import COLUMNS, REQUIRED_COLUMNS, STATUSES, SchemaError, upgrade_row


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


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return json.dumps(list(value))
    return str(value)


class ResultsWriter:
    """Owns one run's CSV. Created exclusively (mode 'x'), so two runs never share a file; each
    row is flushed and fsynced before the next case starts, so a killed run keeps every finished
    case."""

    def __init__(self, results_dir: Path, run_id: str) -> None:
        self.path = results_dir / f"{run_id}.csv"
        self.rows_written = 0
        self._file = open(self.path, "x", newline="", encoding="utf-8")
        self._writer = csv.DictWriter(self._file, fieldnames=COLUMNS, restval="")
        self._writer.writeheader()
        self._sync()

    def append(self, row: dict[str, Any]) -> None:
        unknown = set(row) - set(COLUMNS)
        assert not unknown, f"columns missing from harness.schema: {sorted(unknown)}"
        assert row.get("status", "ok") in STATUSES, f"status {row.get('status')!r} is not one of {STATUSES}"
        self._writer.writerow({k: _cell(v) for k, v in row.items()})
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


def read_rows(path: Path) -> list[dict[str, str]]:
    """Read a results CSV as dicts, upgrading older schemas and refusing newer ones, files that are
    not gpubench results, and truncated lines (SchemaError naming the file and the fix)."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise SchemaError(f"{path}: not a gpubench results file (missing columns: {', '.join(missing[:5])})")
            rows = []
            for row in reader:
                if None in row or any(row.get(c) is None for c in REQUIRED_COLUMNS):
                    raise SchemaError(f"{path}: line {reader.line_num} is truncated — re-run the case or delete the line")
                try:
                    version = int(row["schema_version"])
                except ValueError:
                    raise SchemaError(f"{path}: line {reader.line_num} has schema_version {row['schema_version']!r} — not a gpubench row") from None
                rows.append(upgrade_row(row, version, str(path)))
            return rows
    except (UnicodeDecodeError, csv.Error) as error:
        raise SchemaError(f"{path}: not a readable CSV ({error})") from None
