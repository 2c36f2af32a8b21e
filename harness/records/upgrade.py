"""Rows of older schema versions brought up to this one (records.schema's SCHEMA_VERSION) as text,
before they are typed: what each version changed is listed in records.schema's docstring and
docs/columns.md."""

from __future__ import annotations

from gpubench.harness.core.flags import OVER_BUDGET_FLAG
from gpubench.harness.catalog import case_id_for
from gpubench.harness.catalog.mnist_epoch import GUIDE_TEMPLATE
from gpubench.harness.records.schema import (
    SCHEMA_VERSION,
    SETTING_COLUMNS,
    SchemaError,
    to_cell,
    typed_row,
)
from gpubench.harness.records.store import machine_id

V1_DRAM_MIN_ELEMENTS = 2**26

# Rows of older schema versions brought up to this one as text, before they are typed. Version 1
# timed a whole epoch as one sample: its mean step time becomes median_s so epochs compare like for
# like (spread unknown). Epoch rows of version 3 or older were never raced: `raced` reads False.

# Workloads whose cases carry `raced` (the epoch race picked their precision and memory format).
RACED_WORKLOADS = ("mnist_epoch", "time_to_accuracy")

# Settings the preloaded loader never uses: version 1 wrote DataLoader defaults into them.
_DATALOADER_ONLY = (
    "num_workers",
    "pin_memory",
    "non_blocking",
    "persistent_workers",
    "prefetch_factor",
)


def _v1_epoch_step(row: dict[str, str]) -> dict[str, str]:
    """A v1 epoch row's mean step (step_s, else batch_size / samples_per_s) as its timing; without
    one, median_s is emptied rather than left as a whole epoch beside step times."""
    step = row.get("step_s") or ""
    if not step and row.get("batch_size") and row.get("samples_per_s"):
        try:
            step = repr(float(row["batch_size"]) / float(row["samples_per_s"]))
        except (ValueError, ZeroDivisionError):
            step = ""
    timing = dict.fromkeys(("median_s", "min_s", "mean_s"), step)
    return dict(row, **timing, iqr_s="", stddev_s="", cv="", samples_s=f"[{step}]" if step else "")


def _upgrade_v1(row: dict[str, str]) -> dict[str, str]:
    """Version 1 -> 2: unused settings emptied, the case id rebuilt, an epoch's timing per step,
    build 0 of 1."""
    row = dict(row)
    if row.get("workload") == "mnist_epoch":
        row = _v1_epoch_step(row)
        # v1 epoch cases always carried every setting; an empty one (a hand-made file) was the
        # default
        row.update(
            {k: to_cell(v) for k, v in GUIDE_TEMPLATE.items() if not row.get(k) and v is not None}
        )
        if row.get("loader") == "preloaded":
            row.update({k: "" for k in _DATALOADER_ONLY})
        elif row.get("prefetch_factor") in ("0", "0.0"):
            # v1 wrote 0 for "DataLoader's default"
            row["prefetch_factor"] = ""
    if row.get("workload") == "elementwise" and not row.get("memory_tier"):
        # version 1 named no memory tier: past 2^26 elements (768 MiB moved by an fp32 add) no cache
        # holds it
        row["memory_tier"] = (
            "dram" if float(row.get("size") or 0) >= V1_DRAM_MIN_ELEMENTS else "unknown"
        )
    # what version 1 measured, by device
    if not row.get("mem_source") and row.get("peak_mem_bytes"):
        device = row.get("device", "")
        row["mem_source"] = (
            "cuda-allocator"
            if device.startswith("cuda")
            else "mps-driver"
            if device == "mps"
            else "cpu-rss"
        )
    typed = typed_row({c: row.get(c, "") for c in SETTING_COLUMNS}, "v1 upgrade")
    if row.get("workload"):
        row["case_id"] = case_id_for(row["workload"], typed)
    row.setdefault("build", "0")
    row.setdefault("builds", "1")
    row["schema_version"] = str(SCHEMA_VERSION)
    return row


def _budget_flags(row: dict[str, str]) -> str:
    """An old row's flags, with `over-budget` where its reason's words (all that said it before
    version 6) did."""
    flags, skipped = row.get("flags") or "", row.get("status") == "skipped"
    said = skipped and (row.get("reason") or "").startswith("over budget")
    return ";".join(filter(None, [flags, OVER_BUDGET_FLAG])) if said else flags


# The last schema whose rows may carry the old machine_id: a hash of the kernel release, the GPUs
# the job was given and no host name (records.schema's docstring).
OLD_MACHINE_ID = 5


def _whole(text: str | None) -> str:
    """A count as the store writes it ("64", never "64.0"); text that is no number stays."""
    try:
        return str(int(float(text or "")))
    except (ValueError, OverflowError):
        return text or ""


def _gib(text: str | None) -> str:
    """RAM in bytes as the store's whole GiB; "" where the cell holds no number."""
    try:
        return str(round(float(text or "") / 2**30))
    except (ValueError, OverflowError):
        return ""


def read_machine_id(row: dict[str, str]) -> str:
    """An old row's machine as records.store.machine_id hashes one, from the columns the row holds:
    host name, CPU model, core count and RAM in GiB. The node's GPU list is not in the row: none is
    hashed, and the device name stands for it where a report tells devices apart (every row of a
    run keeps one machine, whichever device it measured)."""
    identity = {
        "hostname": row.get("hostname") or "",
        "cpu_model": row.get("cpu_model") or "",
        "cpu_cores": _whole(row.get("cpu_cores")),
        "ram_gib": _gib(row.get("ram_bytes")),
        "gpus": "",
    }
    return machine_id(identity)


def upgrade_row(row: dict[str, str], version: int, source: str) -> dict[str, str]:
    """Bring a row written by schema `version` up to SCHEMA_VERSION; refuse newer ones."""
    if version > SCHEMA_VERSION:
        raise SchemaError(
            f"{source}: written by a newer gpubench (schema {version}, this one reads <= "
            f"{SCHEMA_VERSION}) — upgrade gpubench to read it"
        )
    if version < 1:
        raise SchemaError(f"{source}: schema_version {version} is not a gpubench schema")
    if version == 1:
        row = _upgrade_v1(row)
    # 2 -> 3, 3 -> 4 and 4 -> 5 only added columns (read as empty) and a status
    if version <= 5:
        row = dict(row, schema_version=str(SCHEMA_VERSION), flags=_budget_flags(row))
        if version <= 3 and row.get("workload") in RACED_WORKLOADS and not row.get("raced"):
            # an epoch before the race: its template is still the template
            row["raced"] = to_cell(False)
    if version <= OLD_MACHINE_ID:
        # one identity for every row read: a kernel update or a job's share of the GPUs never
        # splits a machine
        row["machine_id"] = read_machine_id(row)
    return row
