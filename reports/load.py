"""Load, validate and merge result CSVs."""

from __future__ import annotations

import csv
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from harness.catalog import short_id
from harness.results import file_ends_whole, read_rows
from harness.schema import (
    BOOL_COLUMNS,
    BY_NAME,
    COLUMNS,
    NON_EMPTY,
    NUMERIC_COLUMNS,
    REQUIRED_COLUMNS,
    SCHEMA_VERSION,
    SETTING_COLUMNS,
    SchemaError,
    parse_cell,
)


class ReportError(ValueError):
    """Bad input for report/compare: one line naming the file and the fix."""


def result_files(paths: list[Path]) -> list[Path]:
    """The results files named or found in folders: regular files only (a FIFO would hang the
    reader; a folder or a dangling link named *.csv is not a results file)."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(p for p in sorted(path.rglob("*.csv")) if p.name != "merged.csv" and p.is_file())
        elif path.is_file():
            files.append(path)
        elif path.exists():
            raise ReportError(f"{path}: not a regular file — name a results CSV or a folder of them")
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


def _typed_column(column: str, text: pd.Series, files: pd.Series, lines: pd.Series) -> pd.Series:
    """One column of a current-schema file typed at once (the same rules as harness.schema's
    per-cell parsing); a cell that is not its type names the file and line."""
    kind = BY_NAME[column].kind if column in BY_NAME else "str"
    empty = text == ""
    if kind in ("int", "float"):
        values = pd.to_numeric(text.where(~empty), errors="coerce")
        damaged = values.isna() & ~empty
        damaged |= ~empty & ~np.isfinite(values.fillna(0))
        if kind == "int":
            damaged |= ~empty & (values.fillna(0) % 1 != 0)
        if kind == "int" or BY_NAME[column].unit in ("s", "bytes"):
            damaged |= ~empty & (values.fillna(0) < 0)
    elif kind == "bool":
        values = text.map(BOOLEANS)
        damaged = values.isna() & ~empty
    elif kind == "json" or column in PER_CELL:  # few distinct rules: the schema's own per-cell check, once per distinct text
        verdicts = {t: _cell_ok(column, t) for t in text.unique()}
        damaged = ~text.map(verdicts).astype(bool)
        values = text.where(~empty, None)
    else:
        return text.where(~empty, None)
    if damaged.any():
        first = damaged.idxmax()
        raise ReportError(f"{files[first]}: line {lines[first]}: column {column} holds {text[first]!r} — the file is damaged; re-run the case or delete the line")
    return values if kind != "bool" else values.astype(object).where(~empty, None)


def _cell_ok(column: str, text: str) -> bool:
    try:
        parse_cell(column, text)
        return True
    except ValueError:
        return False


# Text columns with rules of their own (harness.schema.check_value): never empty, a known status,
# an ISO 8601 timestamp.
PER_CELL = (*NON_EMPTY, "status", "timestamp_utc")
BOOLEANS = {"True": True, "False": False, "true": True, "false": False, "1": True, "0": False}


def read_records(path: Path) -> tuple[list[str], list[list[str]]] | None:
    """The header and records of a current-schema file, checked for cut lines; None for an older
    or newer file (harness.results.read_rows upgrades or refuses it, naming the fix)."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            records = list(csv.reader(handle))
    except (UnicodeDecodeError, csv.Error) as error:
        raise ReportError(f"{path}: not a readable CSV ({error})") from None
    header = records[0] if records else []
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise ReportError(f"{path}: not a gpubench results file (missing columns: {', '.join(missing[:5])})")
    body = records[1:]
    odd = next((number for number, record in enumerate(body, start=2) if len(record) != len(header)), None)
    if odd is not None:
        fields = len(body[odd - 2])
        what = "is truncated" if fields < len(header) else f"has {fields} fields, the header {len(header)}"
        raise ReportError(f"{path}: line {odd} {what} — re-run the case or delete the line")
    if body and not file_ends_whole(path):
        raise ReportError(f"{path}: line {len(body) + 1} is truncated (the file ends inside it) — re-run the case or delete the line")
    version = header.index("schema_version")
    if any(record[version] != str(SCHEMA_VERSION) for record in body):
        return None
    return header, body


CHUNK_FILES = 100  # files typed together: few pandas calls per column, bounded text in memory


@dataclass
class _Chunk:
    """Records of several current-schema files, typed together."""

    header: list[str] | None = None
    records: list[list[str]] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    files: int = 0

    def add(self, path: Path, header: list[str], body: list[list[str]]) -> None:
        if self.header is not None and header != self.header:  # another column order: reorder
            order = [header.index(c) if c in header else None for c in self.header]
            body = [[record[i] if i is not None else "" for i in order] for record in body]
        self.header = self.header or header
        self.records.extend(body)
        self.sources.extend([path.stem] * len(body))
        self.paths.extend([str(path)] * len(body))
        self.lines.extend(range(2, len(body) + 2))
        self.files += 1


def _typed_chunk(chunk: _Chunk) -> pd.DataFrame:
    """Type a batch of current-schema files at once. Text columns are deduplicated through a
    categorical (a thousand runs repeat the same host, device and settings strings)."""
    text = pd.DataFrame(chunk.records, columns=chunk.header, dtype=object)
    text["source_file"] = chunk.sources
    paths, lines = pd.Series(chunk.paths), pd.Series(chunk.lines)
    typed = {}
    for column in text.columns:
        values = _typed_column(column, text[column], paths, lines) if column != "source_file" else text[column]
        if values.dtype == object and column != "samples_s":
            values = values.astype("category").astype(object)
        typed[column] = values
    return pd.DataFrame(typed)


def load_results(paths: list[Path]) -> pd.DataFrame:
    """All rows of all files as one frame, typed by harness.schema: numbers as floats (NaN when
    empty), booleans as True/False/None; `samples_s` stays JSON text (parse it with `samples`).
    Current-schema files are typed column by column once for all files (a thousand runs load in
    seconds); older files are upgraded row by row. Adds `machine` (a unique label per
    configuration), `setting` (the case's short id, rebuilt from its typed settings) and
    `source_file`."""
    pending = _Chunk()
    typed: list[dict[str, object]] = []
    frames: list[pd.DataFrame] = []
    for path in result_files(paths):
        read = read_records(path)
        if read is None:
            typed.extend(dict(row, source_file=path.stem) for row in read_one(path))
        elif read[1]:
            pending.add(path, *read)
        if pending.files == CHUNK_FILES:  # type as we go: only one chunk of text in memory
            frames.append(_typed_chunk(pending))
            pending = _Chunk()
    if pending.files:
        frames.append(_typed_chunk(pending))
    if typed:
        frames.append(pd.DataFrame(typed))
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if frame.empty:
        raise ReportError(f"no result rows in {', '.join(map(str, paths))} — the files hold only headers; run some cases first")
    frame = frame.reindex(columns=list(COLUMNS) + [c for c in frame.columns if c not in COLUMNS])
    for column in NUMERIC_COLUMNS:
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    for column in BOOL_COLUMNS:
        frame[column] = frame[column].astype("object").where(frame[column].notna(), None)
    frame["samples_s"] = frame["samples_s"].map(lambda v: json.dumps(v) if isinstance(v, list) else v)  # older files come typed
    frame["flags"] = frame["flags"].astype("object").fillna("")
    frame["reason"] = frame["reason"].astype("object").fillna("")
    frame["build"] = frame["build"].fillna(0)
    frame = frame.copy()  # one block per dtype again after the column-by-column typing (pandas warns otherwise)
    frame["machine"] = machine_labels(frame)
    frame["setting"] = setting_labels(frame)
    return frame


def setting_labels(frame: pd.DataFrame) -> pd.Series:
    """The short id of each row's settings, computed once per distinct case."""
    keys = ["workload", *SETTING_COLUMNS]
    settings = frame[keys].astype(object).where(frame[keys].notna(), None)
    rows = list(settings.itertuples(index=False, name=None))
    labels = {row: short_id(row[0], dict(zip(SETTING_COLUMNS, row[1:]))) for row in dict.fromkeys(rows)}
    return pd.Series([labels[row] for row in rows], index=frame.index)


def samples(cell: object) -> list[float]:
    """The raw samples of one row (the JSON text of `samples_s`)."""
    if isinstance(cell, list):
        return [float(x) for x in cell]
    if not isinstance(cell, str) or not cell.strip():
        return []
    try:
        return [float(x) for x in json.loads(cell)]
    except (ValueError, TypeError):
        return []


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


def load_energy_notes(paths: list[Path]) -> dict[str, str]:
    """Why a run has no energy figures (`<run_id>.env.json`'s energy note, e.g. no RAPL in a VM):
    CSV file stem -> the note. Runs with a counter, or without a readable sidecar, are absent."""
    notes: dict[str, str] = {}
    for csv_path in result_files(paths):
        sidecar = csv_path.with_name(f"{csv_path.stem}.env.json")
        try:
            note = (json.loads(sidecar.read_text(encoding="utf-8")).get("energy") or {}).get("note") if sidecar.exists() else None
        except (OSError, ValueError, AttributeError):
            continue
        if note:
            notes[csv_path.stem] = str(note)
    return notes


def machine_labels(frame: pd.DataFrame) -> pd.Series:
    """A unique human name per configuration (machine, device, torch): 'host · device name
    (device)'; two machines with one name get their machine_id, one machine with two torch
    versions gets the version (an upgrade is a different configuration, never merged)."""
    base = frame["hostname"].astype(str) + " · " + frame["device_name"].astype(str) + " (" + frame["device"].astype(str) + ")"
    ids_per_label = frame.groupby(base)["machine_id"].transform("nunique")
    torches = frame.groupby([frame["machine_id"], frame["device"]])["torch_version"].transform("nunique")
    label = base.where(ids_per_label <= 1, base + " #" + frame["machine_id"].astype(str).str[:6])
    return label.where(torches <= 1, label + " torch " + frame["torch_version"].astype(str))


__all__ = ["ReportError", "load_results", "load_top_ops"]


def write_merged(paths: list[Path], out: Path) -> None:
    """Every row of every file, in the current schema, one header: current-schema files are copied
    byte for byte after their header (load_results has already checked them), older ones upgraded."""
    from harness.schema import to_cell

    header = ",".join(COLUMNS)
    with open(out, "w", newline="", encoding="utf-8") as merged:
        writer = csv.writer(merged)
        writer.writerow(COLUMNS)
        for path in result_files(paths):
            with open(path, newline="", encoding="utf-8") as source:
                if source.readline().rstrip("\r\n") == header:
                    version = source.readline()
                    if version.startswith(f"{SCHEMA_VERSION},"):
                        merged.write(version)
                        shutil.copyfileobj(source, merged)
                        continue
            writer.writerows([to_cell(row.get(c)) for c in COLUMNS] for row in read_one(path))
