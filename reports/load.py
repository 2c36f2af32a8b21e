"""Load, validate and merge result CSVs."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from harness.caseids import short_id
from harness.results import read_rows
from harness.schema import BOOL_COLUMNS, COLUMNS, NUMERIC_COLUMNS, SETTING_COLUMNS, SchemaError

class ReportError(ValueError):
    """Bad input for report/compare: one line naming the file and the fix."""


def result_files(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(p for p in sorted(path.rglob("*.csv")) if p.name != "merged.csv")
        elif path.exists():
            files.append(path)
        else:
            raise ReportError(f"{path}: no such file or folder")
    if not files:
        raise ReportError(f"no CSV files found in {', '.join(map(str, paths))} — run `gpubench run` first or name a results folder")
    return files


def read_one(path: Path) -> list[dict[str, object]]:
    """Typed rows of one file, upgraded to the current schema (harness.results reads; this names
    the error for the report commands)."""
    try:
        return read_rows(path)
    except SchemaError as error:
        raise ReportError(str(error)) from None


def load_results(paths: list[Path]) -> pd.DataFrame:
    """All rows of all files as one frame, typed by harness.schema: numbers as floats (NaN when
    empty), booleans as True/False/None, raw samples as lists. Adds `machine` (a label) and
    `setting` (the case's short id, rebuilt from its typed settings)."""
    rows = [dict(row, source_file=path.stem) for path in result_files(paths) for row in read_one(path)]
    if not rows:
        raise ReportError(f"no result rows in {', '.join(map(str, paths))} — the files hold only headers; run some cases first")
    frame = pd.DataFrame(rows).reindex(columns=list(COLUMNS) + [c for c in rows[0] if c not in COLUMNS])
    for column in NUMERIC_COLUMNS:
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    for column in BOOL_COLUMNS:
        frame[column] = frame[column].astype("object").where(frame[column].notna(), None)
    frame["samples"] = frame["samples_s"].map(lambda v: list(v) if isinstance(v, list) else [])
    frame["flags"] = frame["flags"].astype("object").fillna("")
    frame["reason"] = frame["reason"].astype("object").fillna("")
    frame["build"] = frame["build"].fillna(0)
    frame["machine"] = frame.apply(machine_label, axis=1)
    settings = frame[list(SETTING_COLUMNS)].to_dict("records")
    frame["setting"] = [short_id(w, {k: (None if _missing(v) else v) for k, v in r.items()}) for w, r in zip(frame["workload"], settings)]
    return frame


def _missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def load_top_ops(paths: list[Path]) -> dict[str, dict[str, list[dict]]]:
    """Profiler tables (`<run_id>.ops.json`, written with --profile-ops) found beside the CSVs:
    CSV file stem -> case_id -> top operators. Missing or unreadable sidecars are simply absent."""
    tables: dict[str, dict[str, list[dict]]] = {}
    for csv_path in result_files(paths):
        sidecar = csv_path.with_name(f"{csv_path.stem}.ops.json")
        if sidecar.exists():
            try:
                tables[csv_path.stem] = json.loads(sidecar.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
    return tables


def machine_label(row: pd.Series) -> str:
    """Human name for a machine+device: 'host · device name (device)'."""
    return f"{row['hostname']} · {row['device_name']} ({row['device']})"


__all__ = ["ReportError", "load_results", "load_top_ops"]
