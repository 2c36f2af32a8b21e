"""Load and merge result CSVs for the report commands: results_reader.read_frame reads and checks
them (the one reader); this finds the files, adds the report's labels, reads the sidecars and names
bad input as one UsageError line naming the file and the fix."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pandas as pd

from gpubench.harness.core.flags import OVER_BUDGET_FLAG, flag_pattern
from gpubench.harness.catalog import short_id, spec_for
from gpubench.harness.core.exits import UsageError
from gpubench.harness.records.results_reader import read_frame
from gpubench.harness.records.safe_files import RefusedPath, kind_refusal, read_json
from gpubench.harness.records.schema import NUMBER, SETTING_COLUMNS, SchemaError, kind_of
from gpubench.reports.judge.text import (
    CONTROL,
    INVISIBLE,
    LINE_BREAKS,
    plain,
    replace_texts,
    short_label,
)
from gpubench.reports.judge.aggregate import column_or
from gpubench.reports.judge.merged import write_cells
from gpubench.reports.judge.screen import screen


def result_files(paths: list[Path], left_out: list[str] | None = None) -> list[Path]:
    """The results files named or found in folders. A named file is read where it is (a named link
    as its target); a folder is walked without leaving it: a link found inside is not followed
    (one to a place inside is walked as that place; one out of the folder is named in `left_out`,
    else refused: a report reads only what it was named). Hidden folders (`.name/`,
    never runs) and a report's merged.csv (one with its report.md beside it) are not runs; a FIFO or
    device named *.csv is named in `left_out`. A folder that cannot be listed is named in
    `left_out` when given, else refused: never silently missing."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(_walk(path, left_out))
        elif path.is_file():
            files.append(Path(os.path.realpath(path)) if path.is_symlink() else path)
        elif path.exists():
            raise UsageError(f"{path}: not a regular file — name a results CSV or a folder of them")
        else:
            raise UsageError(f"{path}: no such file or folder")
    # nothing found because nothing could be listed: say that, not "run first"
    if not files and left_out:
        raise UsageError(f"no results read in {', '.join(map(str, paths))}: {left_out[0]}")
    if not files:
        raise UsageError(
            f"no CSV files found in {', '.join(map(str, paths))} "
            "— run `gpubench run` first or name a results folder"
        )
    return files


def _walk(folder: Path, left_out: list[str] | None) -> list[Path]:
    found, inside = [], os.path.realpath(folder)

    def leave_out(line: str) -> None:
        if left_out is None:
            raise UsageError(line)
        left_out.append(line)

    def unreadable(error: OSError) -> None:
        leave_out(
            f"{error.filename}: cannot list the folder ({error.strerror}) — its runs are not in "
            "this report; make it readable"
        )

    def link(path: Path) -> bool:
        """Whether `path` is a link (never followed); one out of the folder is named."""
        if not path.is_symlink():
            return False
        target = os.path.realpath(path)
        if os.path.commonpath([inside, target]) != inside:
            leave_out(
                f"{path}: a link to {target}, outside {folder} — not followed (a report reads "
                f"only what it is named); name {target} too to include it"
            )
        return True

    # links to folders are listed, not entered
    for root, dirs, names in os.walk(folder, onerror=unreadable):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not link(Path(root, d)))
        for name in sorted(n for n in names if n.endswith(".csv") and not n.startswith(".")):
            path = Path(root, name)
            if name == "merged.csv" and os.path.lexists(path.with_name("report.md")):
                # a report's: its rows are the runs'
                continue
            try:
                mode = os.lstat(path).st_mode
            # removed while listed
            except FileNotFoundError:
                continue
            if stat.S_ISREG(mode):
                found.append(path)
            elif not link(path) and left_out is not None:
                left_out.append(str(kind_refusal(path, mode)))
    # the order rglob gave: the first machine is the default baseline
    return sorted(found)


def _readable(files: list[Path], named: set[Path], left_out: list[str]) -> list[Path]:
    """The files read_frame reads whole; one found in a folder that it refuses (not ours, cut by a
    run still writing it, unreadable) is named in `left_out`, one named by the user still
    refuses."""
    kept = []
    for path in files:
        try:
            read_frame([path], [])
            kept.append(path)
        except (SchemaError, OSError) as error:
            if path in named:
                raise UsageError(_read_defect(error)) from None
            left_out.append(_read_defect(error))
    return kept


def _read_defect(error: Exception) -> str:
    if isinstance(error, RefusedPath):
        return str(error)
    if isinstance(error, OSError):
        return (
            f"{error.filename}: cannot read ({error.strerror or error}) "
            "— make it readable or move it out of the folder"
        )
    return str(error)


# a report folder (or a file in it) that is a link
OUT_FIX = "pass --out with the folder itself"
# what the report adds to the rows it reads
LABELS = ("source_file", "source_path", "source_line", "machine", "setting")


def load_results(
    paths: list[Path],
    refused: list[str] | None = None,
    left_out: list[str] | None = None,
    renamed: dict[str, set[str]] | None = None,
) -> pd.DataFrame:
    """All rows of the results files named or found in folders, as read_frame reads them, plus the
    report's labels (`machine`, `setting`, `source_file`); empty `flags` and `reason` read as "".
    With `refused`, rows with an impossible figure are left out and named there (without, they
    refuse their file); with `left_out` (a store: some files not ours), a file in a folder that
    cannot be read as results is left out and named there; `renamed` as read_frame's."""
    files = result_files(paths, left_out)
    # this read's refusals: a failed read's are not kept
    found: list[str] | None = None if refused is None else []
    try:
        frame = read_frame(files, found, renamed)
    # a SchemaError already names the file and the fix
    except (SchemaError, OSError) as error:
        if left_out is None:
            raise UsageError(_read_defect(error)) from None
        named = {Path(os.path.realpath(p)) if p.is_symlink() else p for p in paths}
        # only on this path: each file read once more
        files = _readable(files, named, left_out)
        if not files:
            raise UsageError(
                f"no readable results in {', '.join(map(str, paths))}: {left_out[0]}"
            ) from None
        # the chunks read before the failure named their rows already
        found = None if refused is None else []
        frame = read_frame(files, found, renamed)
    if refused is not None:
        refused.extend(found or [])
        frame = screen(frame, {f.stem: str(f) for f in files}, refused)
    if frame.empty:
        why = (
            f"every row was refused ({refused[0]}{' …' if len(refused) > 1 else ''})"
            if refused
            else "the files hold only headers; run some cases first"
        )
        raise UsageError(f"no result rows in {', '.join(map(str, paths))} — {why}")
    frame = clean_text(frame)
    frame["flags"] = frame["flags"].fillna("")
    frame["reason"] = frame["reason"].fillna("")
    frame["build"] = frame["build"].fillna(0)
    frame["machine"] = machine_labels(frame)
    frame["setting"] = setting_labels(frame)
    return frame


def clean_text(frame: pd.DataFrame) -> pd.DataFrame:
    """Text cells on one printable line (gpubench.reports.judge.text.plain): a NUL, a line break
    or a bidi override in a hostname or reason reaches neither merged.csv, a plot nor report.md."""
    return replace_texts(frame, _unclean, plain)


def _unclean(text: str) -> bool:
    """Whether plain() would change `text`. Printable ASCII (a store's raw samples: a hundred
    thousand distinct kilobyte texts) holds none of what it replaces, checked in C before any
    pattern is searched."""
    if text.isascii() and text.isprintable():
        return False
    return any(rule.search(text) for rule in (CONTROL, LINE_BREAKS, INVISIBLE))


# A cell a spreadsheet reads as a formula (OWASP: CSV injection), after any leading whitespace an
# import may trim (a tab is a space by then: clean_text); the full-width forms are typed for them
# under East Asian input methods.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def runs_as_formula(text: str) -> bool:
    """Whether a spreadsheet could run `text`: it starts, after whitespace, as a formula, and is no
    number."""
    return text.lstrip().startswith(FORMULA_START) and not NUMBER.fullmatch(text)


def spreadsheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with each text cell that a spreadsheet would run as a formula (a run id, host name or
    reason starting, after whitespace, with = + - @ tab or CR) given a leading apostrophe, as OWASP
    advises for exported CSVs; text that is a number (-1.5) and number columns stay as they are. For
    merged.csv only: the report's own tables read the frame itself."""
    return replace_texts(frame, runs_as_formula, lambda text: "'" + text, skip=LABELS)


def write_merged(frame: pd.DataFrame, out: Path) -> None:
    """merged.csv: every loaded row in the current schema under one header (the schema's columns,
    then any other a file had), each cell as the harness writes it
    (gpubench.reports.judge.merged: column by column)."""
    write_cells(frame, out, [c for c in frame.columns if c not in LABELS], OUT_FIX)


def setting_labels(frame: pd.DataFrame) -> pd.Series:
    """The short id of each row's settings, computed once per distinct case; a workload the
    catalogue does not declare (a user's own benchmark) is labelled by its case id's tail, as its
    writer named it."""
    keys = ["workload", *SETTING_COLUMNS]
    settings = frame[keys].astype(object).where(frame[keys].notna(), None)
    rows = list(settings.itertuples(index=False, name=None))
    labels = {row: short_id(row[0], _typed_settings(row[1:])) for row in dict.fromkeys(rows)}
    declared = frame["workload"].map(
        lambda name: spec_for(name) is not None if isinstance(name, str) else False
    )
    tails = frame["case_id"].astype(str).str.split("/", n=1).str[-1]
    return pd.Series([labels[row] for row in rows], index=frame.index).where(declared, tails)


INT_SETTINGS = frozenset(c for c in SETTING_COLUMNS if kind_of(c) == "int")


def _typed_settings(values: tuple) -> dict[str, object]:
    """A row's settings as the writer typed them: integer settings read back as floats (a column
    that may be empty) are ints again, so a label says bs1024, not bs1024.0."""
    return {
        c: int(v) if c in INT_SETTINGS and v is not None else v
        for c, v in zip(SETTING_COLUMNS, values)
    }


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


def _ops_table(data: object) -> tuple[dict[str, list[dict]], bool]:
    """A sidecar's cases and their operators (dicts naming an `op`), and whether all of it was
    that."""
    if not isinstance(data, dict):
        return {}, False
    table = {
        str(case): [op for op in ops if isinstance(op, dict) and "op" in op]
        for case, ops in data.items()
        if isinstance(ops, list)
    }
    whole = len(table) == len(data) and all(
        len(table[str(case)]) == len(ops) for case, ops in data.items()
    )
    return table, whole


# a profiler table of every case is a few MB
MAX_SIDECAR_BYTES = 16 * 2**20


def read_sidecar(csv_path: Path, suffix: str, notes: list[str] | None = None) -> object | None:
    """The JSON of the sidecar `<run_id>.<suffix>.json` beside a run's CSV
    (gpubench.harness.records.safe_files. read_json: no link followed, regular files only, size and
    depth bounded), None when there is none or it cannot be read; one that exists and is not read is
    named in `notes` when given."""
    sidecar = csv_path.with_name(f"{csv_path.stem}.{suffix}.json")
    try:
        return read_json(sidecar, MAX_SIDECAR_BYTES, "sidecar")
    except FileNotFoundError:
        return None
    except RefusedPath as error:
        why = str(error)
    except OSError as error:
        why = f"{sidecar}: cannot read ({error.strerror or error})"
    except ValueError as error:
        why = f"{sidecar}: not JSON ({str(error)[:80]})"
    if notes is not None:
        notes.append(why)
    return None


def load_top_ops(
    paths: list[Path], notes: list[str] | None = None
) -> dict[str, dict[str, list[dict]]]:
    """Profiler tables (`<run_id>.ops.json`, written with --profile-ops) found beside the CSVs: CSV
    file stem -> case_id -> top operators. A missing sidecar is simply absent; what is not such a
    table in one (not JSON, not a dict of lists of operators) is left out, said in `notes`."""
    tables: dict[str, dict[str, list[dict]]] = {}
    for csv_path in result_files(paths, []):
        if not os.path.lexists(csv_path.with_name(f"{csv_path.stem}.ops.json")):
            continue
        unread: list[str] = []
        data = read_sidecar(csv_path, "ops", unread)
        tables[csv_path.stem], whole = _ops_table(data)
        if not whole and notes is not None:
            why = f" ({unread[0]})" if unread else ""
            notes.append(
                f"{csv_path.stem}.ops.json is not (wholly) a profiler table: what is not was left "
                f"out{why}"
            )
    return tables


def load_env_sidecars(
    paths: list[Path], notes: list[str] | None = None
) -> tuple[dict[str, str], dict[str, float]]:
    """From each run's `<run_id>.env.json`, per CSV file stem: why it has no energy figures (its
    energy note, e.g. no RAPL in a VM), and its GPU's power cap in watts (it lives only there). A
    run without one, or without a readable sidecar, is absent; a sidecar that is there and cannot be
    read is named in `notes`."""
    energy_notes: dict[str, str] = {}
    power_caps_w: dict[str, float] = {}
    for csv_path in result_files(paths, []):
        data = read_sidecar(csv_path, "env", notes)
        if not isinstance(data, dict):
            continue
        energy = data.get("energy")
        if isinstance(energy, dict) and energy.get("note"):
            energy_notes[csv_path.stem] = str(energy["note"])
        readings = [data.get(k) for k in ("gpu_telemetry_start", "gpu_telemetry_end")]
        try:
            limits = [
                float(r["gpu_power_limit_w"])
                for r in readings
                if isinstance(r, dict) and "gpu_power_limit_w" in r
            ]
        except (ValueError, TypeError):
            continue
        if limits:
            power_caps_w[csv_path.stem] = min(limits)
    return energy_notes, power_caps_w


# socket.gethostname() can be "": the label must still be text
NO_HOST = "(no host name)"


def base_labels(frame: pd.DataFrame) -> pd.Series:
    """'host · device name (device)' per row, each part at most MAX_LABEL_CHARS (short_label); an
    empty cell reads as text, never NaN (pandas keeps NaN through astype(str) in a str column, and a
    NaN label drops the rows from every groupby)."""

    # a 10,000-character host name shortened, still unique
    def text(column: str, empty: str) -> pd.Series:
        values = frame[column].fillna("").astype(str).replace("", empty)
        return values.map({value: short_label(value) for value in values.unique()})

    return (
        text("hostname", NO_HOST)
        + " · "
        + text("device_name", "?")
        + " ("
        + text("device", "?")
        + ")"
    )


def machine_labels(frame: pd.DataFrame) -> pd.Series:
    """A unique human name per configuration (machine, device, torch): 'host · device name
    (device)'; two machines with one name get their machine_id, one machine with two torch
    versions gets the version (an upgrade is a different configuration, never merged)."""
    base = base_labels(frame)
    ids_per_label = frame.groupby(base)["machine_id"].transform("nunique")
    torches = frame.groupby([frame["machine_id"], frame["device"]])["torch_version"].transform(
        "nunique"
    )
    label = base.where(ids_per_label <= 1, base + " #" + frame["machine_id"].astype(str).str[:6])
    torch = (
        frame["torch_version"]
        .astype(str)
        .map(lambda text: short_label(text) if isinstance(text, str) else text)
    )
    return label.where(torches <= 1, label + " torch " + torch)


# What makes a run one run: its id on its machine and device. Two nodes (or two GPUs of one) given
# one `--run-id nightly` are two runs.
RUN = ["run_id", "machine_id", "device"]
# joins the parts of a key: clean_text keeps control characters out of every part
KEY_SEP = "\x1f"


def joined(parts: pd.DataFrame) -> pd.Series:
    """Each row's parts as one text, for grouping rows by several columns at once."""
    parts = parts.astype(str)
    return parts.iloc[:, 0].str.cat(parts.iloc[:, 1:], sep=KEY_SEP)


def run_key(frame: pd.DataFrame) -> pd.Series:
    """Each row's run (RUN) as one text."""
    return joined(frame[RUN])


# One machine per device: its machine_id (gpubench.harness.records.store: host and hardware; an
# older row's is given on upgrade), each GPU of a node its own. History, health and before and after
# group runs by it.
MACHINE = ["machine_id", "device", "device_name"]


def machine_keys(frame: pd.DataFrame) -> pd.Series:
    """Each row's machine (MACHINE) as one text, an empty cell as "" (groupby drops NaN keys). Not
    the `machine` label: a torch update splits one machine into two labels."""
    return joined(frame[MACHINE].fillna(""))


def broken_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows that say a case no longer works: failed, out of memory, skipped for a reason of its own,
    or stopped by its epoch cap short of its target. A case a run budget skipped or stopped was not
    given its time: no regression."""
    status = frame["status"]
    capped = (status == "unreached") & column_or(frame, "stopped_by", "").eq("cap")
    return frame[(status.isin(["failed", "oom", "skipped"]) & ~over_budget(frame)) | capped]


def over_budget(frame: pd.DataFrame) -> pd.Series:
    """The rows a run's budget skipped: its `over-budget` flag (schema 6; older rows get it on
    upgrade)."""
    flags = column_or(frame, "flags", "").fillna("").astype(str)
    return (frame["status"] == "skipped") & flags.str.contains(
        flag_pattern(OVER_BUDGET_FLAG), regex=True
    )
