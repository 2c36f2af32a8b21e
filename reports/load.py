"""Load, validate and merge result CSVs."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from harness.results import read_rows
from harness.schema import COLUMNS, SchemaError

NUMERIC = ("size", "batch_size", "num_workers", "accumulation_steps", "effective_batch", "world_size", "rounds",
           "iterations", "median_s", "iqr_s", "min_s", "mean_s", "stddev_s", "cv", "tflops", "peak_tflops",
           "pct_of_peak", "gbps", "peak_mem_bytes", "samples_per_s", "latency_s", "epoch_s", "step_s",
           "data_wait_frac", "train_loss", "test_accuracy", "compile_s", "eager_step_s", "break_even_steps",
           "baseline_median_s", "speedup", "selfcheck_tub_ratio", "selfcheck_events_ratio",
           "samples_per_s_per_rank", "scaling_efficiency", "cpu_cores", "ram_bytes", "gpu_mem_bytes")


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


def read_one(path: Path) -> list[dict[str, str]]:
    """Rows of one file, upgraded to the current schema (harness.results reads; this names the
    error for the report commands)."""
    try:
        return read_rows(path)
    except SchemaError as error:
        raise ReportError(str(error)) from None


def load_results(paths: list[Path]) -> pd.DataFrame:
    """All rows of all files as one frame, numeric columns typed, raw samples parsed."""
    rows = [dict(row, source_file=path.stem) for path in result_files(paths) for row in read_one(path)]
    if not rows:
        raise ReportError(f"no result rows in {', '.join(map(str, paths))} — the files hold only headers; run some cases first")
    frame = pd.DataFrame(rows).reindex(columns=list(COLUMNS) + [c for c in rows[0] if c not in COLUMNS])
    for column in NUMERIC:
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    frame["samples"] = frame["samples_s"].map(parse_samples)
    frame["machine"] = frame.apply(machine_label, axis=1)
    frame["setting"] = frame["case_id"].str.split("/", n=1).str[-1]
    return frame


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


def parse_samples(cell: object) -> list[float]:
    if not isinstance(cell, str) or not cell.strip():
        return []
    try:
        return [float(x) for x in json.loads(cell)]
    except (ValueError, TypeError):
        return []


def machine_label(row: pd.Series) -> str:
    """Human name for a machine+device: 'host · device name (device)'."""
    return f"{row['hostname']} · {row['device_name']} ({row['device']})"


__all__ = ["ReportError", "load_results", "load_top_ops"]
