"""The report's Machines section: each machine's fingerprint, every value its runs recorded for a
field (a machine run at two profiles or two commits says both), fields alike on every machine said
once, the rest folded into a row per part of the machine."""

from __future__ import annotations

import pandas as pd

from gpubench.reports.render.markdown import escape, md_table, section
from gpubench.reports.render.units import human_column

# a row of the section per part of the machine: the fields it folds into one cell
FIELD_ROWS = {
    "identity": ("machine_id", "hostname", "device", "device_name", "device_count"),
    "gpu": (
        "gpu_mem_bytes",
        "sm_count",
        "compute_capability",
        "driver_version",
        "cuda_version",
        "cudnn_version",
    ),
    "cpu": ("cpu_model", "cpu_cores", "ram_bytes", "llc_bytes", "torch_threads"),
    "software": (
        "os",
        "python_version",
        "torch_version",
        "tf32_matmul",
        "gpubench_version",
        "git_commit",
        "profile",
    ),
}
FINGERPRINT_FIELDS = tuple(field for fields in FIELD_ROWS.values() for field in fields)


def shown(field: str, value: object) -> str:
    """A fingerprint value as the report writes it: 135148564480 -> 126 GiB; empty where none was
    recorded."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(human_column(field, value))
    return str(value)


def values_of(rows: pd.Series, field: str) -> str:
    """Every value one machine's rows hold for `field`, in the order its runs recorded them: 'quick,
    full'."""
    texts = [shown(field, value) for value in rows]
    return ", ".join(dict.fromkeys(text for text in texts if text))


def machines_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Fingerprints side by side: a row per field, a column per machine, each cell every value
    recorded."""
    fields = [field for field in FINGERPRINT_FIELDS if field in frame]
    groups = frame.groupby("machine", sort=False)
    table = pd.DataFrame(
        {machine: [values_of(rows[field], field) for field in fields] for machine, rows in groups},
        index=pd.Index(fields, name="field"),
    )
    return table.astype(object)


def folded_rows(table: pd.DataFrame) -> pd.DataFrame:
    """A row per part of the machine (FIELD_ROWS), each cell its fields' values: 'cpu_model AMD
    EPYC; cpu_cores 2'."""
    rows = {}
    for part, fields in FIELD_ROWS.items():
        present = [field for field in fields if field in table.index]
        cells = [
            "; ".join(
                f"{field} {table.at[field, machine]}"
                for field in present
                if table.at[field, machine]
            )
            for machine in table.columns
        ]
        if any(cells):
            rows[part] = cells
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(table.columns)).rename_axis(
        "part"
    )


def render(frame: pd.DataFrame) -> str:
    """The Machines section: fields alike on every machine in one line below the table of the
    rest."""
    table = machines_table(frame)
    same = table[table.nunique(axis=1) == 1] if table.shape[1] > 1 else table.iloc[0:0]
    common = (
        escape(
            "Alike on every machine: "
            + ", ".join(f"{f} {v}" for f, v in same.iloc[:, 0].items())
            + "."
        )
        if len(same)
        else ""
    )
    return section("Machines", md_table(folded_rows(table.drop(same.index)), index=True), common)
