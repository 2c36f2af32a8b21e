"""A machine's history, as the judge reads it: which machines have runs enough for one, and each
run's headline figures. A machine is its machine_id (host and hardware) and device (each GPU of a
node has its own history); gpubench.reports.render.history draws it."""

from __future__ import annotations

import pandas as pd

from gpubench.reports.judge.aggregate import per_case
from gpubench.reports.judge.health import headlines
from gpubench.reports.judge.load import MACHINE, base_labels, machine_keys, run_key
from gpubench.reports.judge.references import FIGURES

HISTORY_MIN_RUNS = 2


def run_figures(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per run of a machine with two runs or more: its identity, run_id, started, torch,
    then a column per headline figure it measured. Sorted by machine, then time."""
    # two nodes (or two GPUs of one) given one --run-id are two runs
    runs_of_rows = run_key(frame)
    # a run starts at its earliest time, not its smallest text (+14:00 sorts wrongly as text)
    at = pd.to_datetime(frame["timestamp_utc"], utc=True, format="ISO8601", errors="coerce")
    runs = (
        frame.assign(started_at=at)
        .groupby(runs_of_rows, sort=False)
        .agg(
            run_id=("run_id", "first"),
            machine_id=("machine_id", "first"),
            device=("device", "first"),
            hostname=("hostname", "first"),
            device_name=("device_name", "first"),
            torch=("torch_version", "first"),
            started=("started_at", "min"),
            cpu_model=("cpu_model", "first"),
            cpu_cores=("cpu_cores", "first"),
            ram_bytes=("ram_bytes", "first"),
        )
    )
    # per_case folds by machine: here, by run
    per_run = frame.assign(machine=runs_of_rows)
    values = headlines(per_case(per_run)).pivot_table(
        index="machine", columns="figure", values="value", aggfunc="first"
    )
    # a run without a headline (-k epochs only) is no point
    runs = runs.join(values[[f for f in FIGURES if f in values.columns]], how="inner")
    # the History line's two runs are judged on their rows (before_after)
    runs["run_key"] = runs.index
    # an empty cell is text too
    runs[["hostname", *MACHINE]] = runs[["hostname", *MACHINE]].fillna("")
    runs = runs[runs.groupby(machine_keys(runs))["started"].transform("size") >= HISTORY_MIN_RUNS]
    if runs.empty:
        return pd.DataFrame()
    ordered = [f for f in FIGURES if f in runs.columns]
    out = runs.reset_index(drop=True)
    out["machine"] = base_labels(out)
    columns = [
        "machine",
        "hostname",
        "machine_id",
        "device",
        "device_name",
        "run_id",
        "run_key",
        "started",
        "torch",
        *ordered,
    ]
    return out.sort_values(["machine", "machine_id", "started"]).reset_index(drop=True)[columns]
