"""The epoch race's per-setting figures in the report: each precision and memory format the race
timed on a machine (`epoch-race.json` in the results folder, which the race keeps per machine,
device, torch and profile), its samples/s, and the test accuracy of an epoch of that setting where
the run trained one."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from gpubench.harness.records.safe_files import RefusedPath, read_json
from gpubench.reports.judge.load import result_files
from gpubench.reports.render.markdown import md_table, section
from gpubench.reports.render.sections import machine_columns
from gpubench.reports.render.units import human_column

# written by gpubench.harness.workloads.common.epoch_race beside the results
RACE_FILE = "epoch-race.json"
# the race's own cap on the file
MAX_RACE_BYTES = 1 << 20
# right after the MNIST training epoch
ORDER = 61
# the race trains the template's CNN from preloaded tensors at its batch size, uncompiled: an epoch
# like that
RACED_EPOCH = {"loader": "preloaded", "batch_size": 256, "compile_mode": "none"}
COLUMNS = [
    "machine_id",
    "device",
    "torch_version",
    "profile",
    "setting",
    "status",
    "samples_per_s",
    "reason",
]


def race_rows(data: object) -> list[dict[str, object]]:
    """One row per contestant of each race in a read `epoch-race.json`; what is not a race's is left
    out."""
    rows: list[dict[str, object]] = []
    for key, race in data.items() if isinstance(data, dict) else ():
        parts = str(key).split("|")
        if (
            len(parts) < 4
            or not isinstance(race, dict)
            or not isinstance(race.get("entries"), list)
        ):
            continue
        for entry in (e for e in race["entries"] if isinstance(e, dict)):
            rate = entry.get("samples_per_s")
            rows.append(
                {
                    "machine_id": parts[0],
                    "device": parts[1],
                    "torch_version": parts[2].removeprefix("torch "),
                    "profile": parts[3],
                    "setting": str(entry.get("name", "")),
                    "status": str(entry.get("status", "")),
                    "reason": str(entry.get("reason", "")),
                    "samples_per_s": float(rate) if isinstance(rate, (int, float)) else math.nan,
                }
            )
    return rows


def load_races(
    paths: list[Path],
    notes: list[str] | None = None,
    renamed: dict[str, set[str]] | None = None,
) -> pd.DataFrame:
    """The races kept in the folders of the results read (one file per folder, read once). A race
    names its machine as the rows beside it were written: where their upgrade gave them another
    machine_id (`renamed`: load.load_results'), the race follows it."""
    rows: list[dict[str, object]] = []
    for folder in dict.fromkeys(path.parent for path in result_files(paths, [])):
        try:
            rows += race_rows(read_json(folder / RACE_FILE, MAX_RACE_BYTES, "epoch race"))
        except FileNotFoundError:
            continue
        except (RefusedPath, OSError, ValueError) as error:
            if notes is not None:
                notes.append(f"{folder / RACE_FILE} left out: {error}")
    races = pd.DataFrame(rows, columns=COLUMNS)
    if renamed:
        read_as = races["machine_id"].map(lambda key: sorted(renamed.get(key, {key})))
        races = races.assign(machine_id=read_as).explode("machine_id")
    return races.drop_duplicates().reset_index(drop=True)


def epoch_accuracy(epochs: pd.DataFrame, setting: str) -> float:
    """The median test accuracy of this machine's epochs trained in the raced setting ('bf16-cl'),
    NaN where none."""
    precision, _, layout = setting.partition("-")
    alike = epochs["precision"].astype(str).eq(precision) & epochs["channels_last"].eq(
        layout == "cl"
    )
    for column, value in RACED_EPOCH.items():
        cells = (
            epochs[column]
            if column in epochs
            else pd.Series(None, index=epochs.index, dtype=object)
        )
        alike &= (
            pd.to_numeric(cells, errors="coerce").eq(value)
            if isinstance(value, int)
            else cells.eq(value)
        )
    return float(epochs.loc[alike, "test_accuracy"].median()) if alike.any() else math.nan


def race_table(races: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    """Per machine of the report whose race was found: setting, samples/s (or why it was skipped),
    accuracy."""
    keys = ["machine_id", "device", "torch_version", "profile"]
    if races.empty or not set(keys) <= set(frame.columns):
        return pd.DataFrame()
    machines = frame.drop_duplicates(keys).set_index(keys)["machine"]
    epochs = frame[(frame["workload"] == "mnist_epoch") & (frame["status"] == "ok")]
    records = []
    for row in races.itertuples(index=False):
        machine = machines.get((row.machine_id, row.device, row.torch_version, row.profile))
        if machine is None:
            continue
        mine = epochs[epochs["machine"] == machine]
        records.append(
            {
                "machine": machine,
                "setting": row.setting,
                "race": (
                    human_column("samples_per_s", row.samples_per_s)
                    if row.status == "ok"
                    else f"skipped: {row.reason}"
                ),
                "epoch_accuracy": human_column("test_accuracy", epoch_accuracy(mine, row.setting)),
            }
        )
    return pd.DataFrame(records)


def render(races: pd.DataFrame, frame: pd.DataFrame) -> str:
    """The race's section: a row per setting, a column per machine where several raced."""
    table = race_table(races, frame)
    if table.empty:
        return ""
    cells = [
        f"{rate}, accuracy {accuracy}" if accuracy else rate
        for rate, accuracy in zip(table["race"], table["epoch_accuracy"])
    ]
    shown = machine_columns(table, ["setting"], cells) if table["machine"].nunique() > 1 else table
    return section(
        "Epoch race: precision and memory format",
        "Training samples/s of each setting the epoch race timed on the machine (a few hundred "
        "steps of the template's CNN from preloaded tensors, batch 256; the fastest trains the "
        f"`-raced` cases), from `{RACE_FILE}` beside the results; `epoch_accuracy` is the test "
        "accuracy of an epoch this run trained in that setting, empty where it trained none.",
        md_table(shown),
    )
