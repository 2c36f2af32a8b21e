"""Is this box healthy? Each machine's headline figures against its device's reference, with the
usual causes to check for a figure >= 10% below, and on a node measured GPU by GPU, the GPU >= 5%
off its siblings (gpubench.reports.render.health draws the sections). Ratios are performance ratios:
above 1 is better whichever way the figure runs (an epoch time is reference/measured)."""

from __future__ import annotations

import functools
import math

import pandas as pd

from gpubench.harness.core.flags import THROTTLED, flag_pattern
from gpubench.reports.judge.aggregate import column_or, per_case
from gpubench.reports.judge.intervals import steady_key
from gpubench.reports.judge.load import KEY_SEP, machine_keys
from gpubench.reports.judge.references import FIGURES, References
from gpubench.reports.judge.tables import TEMPLATE_SETTING

# a figure this far below its reference is flagged
HEALTH_DROP = 0.10
# a GPU this far from its node's median on a headline is flagged
OUTLIER_OFF = 0.05
# an SM clock this far below the reference run's is named as a likely cause
CLOCK_DROP = 0.10
# a power cap this far below the reference run's is named as a likely cause
POWER_DROP = 0.05


def _dram_mask(cases: pd.DataFrame) -> pd.Series:
    """DRAM-resident elementwise cases (a version-1 row's tier is read from its size on upgrade:
    records.upgrade)."""
    return (cases["workload"] == "elementwise") & (column_or(cases, "memory_tier") == "dram")


def _masks(cases: pd.DataFrame) -> dict[str, tuple[pd.Series, str]]:
    """Which aggregated cases each headline figure is the best of, and in which column."""
    col = functools.partial(column_or, cases)
    matmul = cases["workload"] == "matmul"
    pinned = (cases["workload"] == "transfer") & (col("pinned").eq(True))
    masks = {
        f"matmul_{d}_tflops": (matmul & (col("dtype") == d), "tflops")
        for d in ("fp32", "tf32", "fp16", "bf16")
    }
    masks["h2d_pinned_gbps"] = (pinned & (col("direction") == "h2d"), "gbps")
    masks["d2h_pinned_gbps"] = (pinned & (col("direction") == "d2h"), "gbps")
    masks["dram_gbps"] = (_dram_mask(cases), "gbps")
    masks["template_epoch_s"] = (
        (cases["workload"] == "mnist_epoch") & (cases["setting"] == TEMPLATE_SETTING),
        "epoch_s",
    )
    return masks


def headlines(cases: pd.DataFrame) -> pd.DataFrame:
    """One row per machine and headline figure: machine, figure, value, and the case it was read
    from. Throughputs take the steady best size (by groupby: a machine here may be one run of a
    thousand), the epoch its template median; ties go to the first."""
    parts, empty = [], pd.DataFrame(columns=["machine", "figure", "value", "case_id"])
    if cases.empty:
        return empty
    for figure, (mask, column) in _masks(cases).items():
        if column not in cases:
            continue
        rows = cases[mask].dropna(subset=[column])
        higher = FIGURES[figure].higher_is_better
        # a store's history: one group per run, picked at once
        key = steady_key(rows, column) if higher else column
        by_machine = rows.dropna(subset=[key]).groupby("machine", sort=False)[key]
        best = by_machine.idxmax() if higher else by_machine.idxmin()
        picked = rows.loc[best.to_numpy()]
        parts.append(
            pd.DataFrame(
                {
                    "machine": best.index,
                    "figure": figure,
                    "value": picked[column].to_numpy(float),
                    "case_id": picked["case_id"].to_numpy(),
                }
            )
        )
    return pd.concat(parts, ignore_index=True) if parts else empty


def _runs(frame: pd.DataFrame, identity: pd.Series) -> tuple[pd.Series, pd.DataFrame]:
    """Each row's run key (identity and run id), and per run key: identity, run_id, machine (the
    run's label), started (its first timestamp), latest (the newest run of its machine)."""
    run_ids = frame["run_id"].astype(str)
    keys = identity + KEY_SEP + run_ids
    columns = pd.DataFrame(
        {
            "identity": identity,
            "run_id": run_ids,
            "machine": frame["machine"],
            "started": frame["timestamp_utc"],
        }
    )
    runs = columns.groupby(keys, sort=False).agg(
        identity=("identity", "first"),
        run_id=("run_id", "first"),
        machine=("machine", "first"),
        started=("started", "min"),
    )
    newest = runs.sort_values("started", kind="stable").groupby("identity", sort=False).tail(1)
    runs["latest"] = runs.index.isin(newest.index)
    return keys, runs


def latest_headlines(frame: pd.DataFrame, cases: pd.DataFrame) -> pd.DataFrame:
    """headlines(), but a machine with several runs is judged on the latest run that measured each
    figure (folding its runs would let old healthy runs outvote today's drop). Adds run_id, started
    and latest (the figure's run is the machine's newest, so its causes are read in the same
    run)."""
    keys, runs = _runs(frame, machine_keys(frame))
    if runs["machine"].is_unique and runs["identity"].is_unique:
        # one run per machine: the same figures, already aggregated
        heads = headlines(cases)
        return heads.merge(
            runs[["machine", "run_id", "started", "latest"]], on="machine", how="left"
        )
    per_run = headlines(per_case(frame.assign(machine=keys))).join(
        runs.drop(columns="machine"), on="machine"
    )
    latest = (
        per_run.sort_values("started", kind="stable")
        .groupby(["identity", "figure"], sort=False)
        .tail(1)
    )
    # a machine's rows keep one name
    labels = runs[runs["latest"]].set_index("identity")["machine"]
    latest = latest.assign(machine=latest["identity"].map(labels))
    return latest[["machine", "figure", "value", "run_id", "started", "latest"]].reset_index(
        drop=True
    )


def _earlier_run(run_id: str, started: object, latest: bool) -> str:
    """'' for a figure of the machine's newest run, else which run it is from and when."""
    if latest:
        return ""
    day = pd.to_datetime(started, utc=True, format="ISO8601", errors="coerce")
    return f"from run {run_id} of {day:%Y-%m-%d}" if not pd.isna(day) else f"from run {run_id}"


def performance_ratio(value: float, reference: float, higher_is_better: bool) -> float:
    return value / reference if higher_is_better else reference / value


def flag_edge(reference: float, higher_is_better: bool) -> float:
    """The figure at which health flags a machine: HEALTH_DROP below its reference, in the figure's
    direction (a time that long above it)."""
    return reference * (1 - HEALTH_DROP) if higher_is_better else reference / (1 - HEALTH_DROP)


def _devices(frame: pd.DataFrame) -> pd.DataFrame:
    """machine label -> machine_id, hostname, device, device_name."""
    return frame.groupby("machine", sort=False)[
        ["machine_id", "hostname", "device", "device_name"]
    ].first()


def health_table(
    frame: pd.DataFrame, cases: pd.DataFrame, refs: References, heads: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Per machine and headline with a reference: measured, reference, ratio, the published maximum
    and its ratio, `health`, and the run the figure is from (`run` says so where it is not the
    newest). `heads`: latest_headlines'."""
    devices, rows = _devices(frame), []
    for head in (latest_headlines(frame, cases) if heads is None else heads).itertuples(
        index=False
    ):
        name = str(devices.loc[head.machine, "device_name"])
        spec = FIGURES[head.figure]
        ours = [r.value for r in refs.for_device(name, "gpubench") if r.figure == head.figure]
        published = [r.value for r in refs.for_device(name, "published") if r.figure == head.figure]
        if not ours and not published:
            continue
        ratio = performance_ratio(head.value, ours[0], spec.higher_is_better) if ours else math.nan
        health = (
            "" if not ours else ("ok" if ratio > 1 - HEALTH_DROP else f"≥{HEALTH_DROP:.0%} below")
        )
        of_published = (
            performance_ratio(head.value, published[0], spec.higher_is_better)
            if published
            else math.nan
        )
        rows.append(
            {
                "machine": head.machine,
                "figure": f"{spec.label} ({spec.unit})",
                "key": head.figure,
                "measured": head.value,
                "reference": ours[0] if ours else math.nan,
                "ratio": ratio,
                "published max": published[0] if published else math.nan,
                "of published": of_published,
                "health": health,
                "run": _earlier_run(head.run_id, head.started, head.latest),
                "run_id": head.run_id,
            }
        )
    # a machine's figures together
    table = pd.DataFrame(rows)
    return (
        table.sort_values("machine", kind="stable").reset_index(drop=True)
        if not table.empty
        else table
    )


def _power_cause(
    mine: pd.DataFrame, power_caps_w: dict[str, float], reference: float | None
) -> str:
    limits = [power_caps_w[s] for s in mine["source_file"].unique() if s in power_caps_w]
    if not limits:
        return (
            "power cap: not recorded — to check: `nvidia-smi -q -d POWER` (Current/Max Power Limit)"
        )
    cap, versus = min(limits), f" (reference run {reference:.0f} W)" if reference else ""
    likely = (
        " ← below the reference: likely cause"
        if reference and cap < (1 - POWER_DROP) * reference
        else ""
    )
    return f"power cap: {cap:.0f} W{versus}{likely}"


def _clock_cause(mine: pd.DataFrame, reference: float | None) -> str:
    clocks = pd.to_numeric(column_or(mine, "gpu_sm_clock_mhz"), errors="coerce").dropna()
    if clocks.empty:
        return (
            "clocks: not recorded — to check: `nvidia-smi -q -d CLOCK` (SM clock under load vs max)"
        )
    median, versus = (
        float(clocks.median()),
        f" (reference run {reference:.0f} MHz)" if reference else "",
    )
    likely = (
        " ← below the reference: likely cause"
        if reference and median < (1 - CLOCK_DROP) * reference
        else ""
    )
    return (
        f"clocks: SM clock median {median:.0f} MHz over {len(clocks)} rows, min "
        f"{clocks.min():.0f}{versus}{likely}"
    )


def _thermal_cause(mine: pd.DataFrame) -> str:
    temps = pd.to_numeric(column_or(mine, "gpu_temp_c"), errors="coerce").dropna()
    hottest = f", hottest {temps.max():.0f} °C" if not temps.empty else ""
    flagged, throttle = (
        mine["flags"].astype(str).str.contains(flag_pattern(THROTTLED)),
        column_or(mine, "gpu_throttle"),
    )
    if throttle.isna().all() and not flagged.any():
        return (
            f"thermal throttling: throttle reasons not recorded{hottest} — to check: `nvidia-smi "
            "-q -d PERFORMANCE`"
        )
    reasons = throttle.fillna("").astype(str)
    # a software power cap alone is normal boost
    slowed = reasons.str.contains("thermal|hardware") | flagged
    power_capped = int(reasons.str.contains("power cap").sum())
    capped = f" (software power cap in {power_capped})" if power_capped else ""
    if not slowed.any():
        return (
            f"thermal throttling: no thermal or hardware slowdown in {len(mine)} "
            f"rows{hottest}{capped}"
        )
    return (
        f"thermal throttling: thermal/hardware slowdown in {int(slowed.sum())} of {len(mine)} "
        f"rows{hottest}{capped} ← likely cause"
    )


def run_rows(frame: pd.DataFrame, machine: str, run_id: str | None = None) -> pd.DataFrame:
    """The rows of run `run_id` (default: the newest) of a machine, found by its identity (an
    earlier run may carry another label)."""
    identity = machine_keys(frame[frame["machine"] == machine].head(1)).iloc[0]
    if run_id is None:
        mine = frame[machine_keys(frame) == identity]
        run_id = str(
            mine.groupby("run_id")["timestamp_utc"].min().sort_values(kind="stable").index[-1]
        )
    rows = frame[frame["run_id"].astype(str) == run_id]
    return rows[machine_keys(rows) == identity]


def causes(
    frame: pd.DataFrame,
    machine: str,
    refs: References,
    power_caps_w: dict[str, float],
    run_id: str | None = None,
) -> list[str]:
    """The usual causes of a figure below its reference, each with what run `run_id` (the flagged
    one; default: the newest) recorded about it, or the command to check it: another run's clocks
    would dilute or contradict it."""
    mine = run_rows(frame, machine, run_id)
    fingerprint = refs.fingerprint.get(str(mine["device_name"].iloc[0]), {})
    return [
        (
            "PCIe link width and generation: not recorded by gpubench — to check: `nvidia-smi -q "
            "-d PCI` (GPU Link Info: current vs max generation and width; a x8 or Gen3 link "
            "halves host↔device GB/s)"
        ),
        _power_cause(mine, power_caps_w, fingerprint.get("gpu_power_limit_w")),
        _clock_cause(mine, fingerprint.get("gpu_sm_clock_mhz")),
        _thermal_cause(mine),
    ]


def outlier_table(
    frame: pd.DataFrame, cases: pd.DataFrame, heads: pd.DataFrame | None = None
) -> pd.DataFrame:
    """GPUs of one node (same machine_id and hostname): per headline, each GPU in its latest run
    against the node's median; `outlier` where one is >= 5% off."""
    heads = (latest_headlines(frame, cases) if heads is None else heads).join(
        _devices(frame), on="machine"
    )
    rows = []
    for (_, host), node in heads.groupby(["machine_id", "hostname"], sort=False):
        if node["device"].nunique() < 2:
            continue
        for figure, group in node.groupby("figure", sort=False):
            if len(group) < 2:
                continue
            median = float(group["value"].median())
            for row in group.itertuples(index=False):
                off = row.value / median - 1
                rows.append(
                    {
                        "node": host,
                        "device": row.device,
                        "figure": FIGURES[figure].label,
                        "value": row.value,
                        "node median": median,
                        "off": f"{off:+.1%}",
                        "gpu": f"outlier (≥{OUTLIER_OFF:.0%} off)"
                        if abs(off) >= OUTLIER_OFF
                        else "ok",
                    }
                )
    return pd.DataFrame(rows)


def unknown_gpus(frame: pd.DataFrame, refs: References) -> list[str]:
    """The GPUs of the rows whose name has no reference at all (CPUs never have one: not named)."""
    gpus = frame.loc[frame["device"].astype(str).str.startswith("cuda"), "device_name"].astype(str)
    return sorted(name for name in set(gpus) if not refs.for_device(name))
