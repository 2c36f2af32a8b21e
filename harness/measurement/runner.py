"""Runs one build of a case end to end: build, measure (harness.measurement.measure), derive figures, memory,
energy and flags, and hand the row to the session. Every outcome (ok, skipped, oom, failed)
becomes a row."""

from __future__ import annotations

import time
from typing import Any
from collections.abc import Callable

from harness.devices import device as devices
from harness.measurement.cases import Case, CaseSkipped, Diverged
from harness.measurement.context import BuildContext
from harness.devices.cpu_memory import cpu_peak_bytes
from harness.measurement.energy_columns import energy_columns
from harness.devices.machine_load import LoadMeter, record_load
from harness.measurement.measure import Measurement, Rounds, Timed, measure
from harness.core.peaks import peak_gbps, peak_tflops
from harness.core.plan import Budget, RoundPlan
from harness.core.run_budget import CaseShare, OverBudget
from harness.records.results import utc_timestamp
from harness.core.stats import NOISY_REL_IQR, SampleStats
from harness.measurement.terminal import one_line
from harness.measurement.workload import Workload


def quality_flags(stats: SampleStats, plan: RoundPlan, budget: Budget, planned_here: bool) -> list[str]:
    """Flags a reader must see beside the figure: noisy, one sample, rounds shorter than planned."""
    flags = []
    if stats.rounds == 1:
        flags.append("one-sample")
    elif stats.rel_iqr > NOISY_REL_IQR:
        flags.append("noisy")
    if planned_here and stats.median_s * plan.iterations < budget.min_round_s:
        flags.append("short-rounds")
    return flags


def impossible_figures(figures: dict[str, Any], device_name: str, dtype: str) -> list[str]:
    """The suite says so when a figure cannot be right."""
    warnings = []
    peak = peak_tflops(device_name, dtype)
    tflops = figures.get("tflops")
    if peak and tflops and tflops > peak:
        warnings.append(f"impossible: {tflops:.1f} TFLOP/s is above the {dtype} datasheet peak {peak:.1f} — the timing missed device work")
    mem_peak = peak_gbps(device_name)
    gbps = figures.get("gbps")
    if mem_peak and gbps and gbps > mem_peak and figures.get("memory_tier") != "cache":
        warnings.append(f"above the memory datasheet peak {mem_peak:.0f} GB/s: cache-resident working set or broken timing")
    return warnings


def measured_row(stats: SampleStats, plan: RoundPlan, samples_s: list[float]) -> dict[str, Any]:
    """The measurement columns of a row, from its raw samples (the DDP worker's row too)."""
    return {
        "rounds": stats.rounds, "iterations": plan.iterations, "median_s": stats.median_s, "iqr_s": stats.iqr_s,
        "min_s": stats.min_s, "mean_s": stats.mean_s, "stddev_s": stats.stddev_s, "cv": stats.cv, "rel_iqr": stats.rel_iqr,
        "iqr_outliers": stats.iqr_outliers, "stddev_outliers": stats.stddev_outliers,
        "round_s": stats.median_s * plan.iterations, "samples_s": samples_s,
    }


def add_memory(out: dict[str, Any], timed: Timed, ctx: BuildContext) -> None:
    """Peak, allocated and reserved memory of the timed region (a workload's own peak wins)."""
    memory = devices.memory_snapshot(ctx.device)
    out.setdefault("peak_mem_bytes", memory.peak_bytes)
    out.setdefault("mem_source", memory.source)
    if ctx.device.type == "cpu" and timed.cpu_memory is not None:
        out.update(peak_mem_bytes=cpu_peak_bytes(timed.cpu_memory), mem_source="cpu-profiler")
    out.update(mem_allocated_bytes=memory.allocated_bytes, mem_reserved_bytes=memory.reserved_bytes)


def derive(case: Case, timed: Timed, measured: Measurement, ctx: BuildContext, device_name: str) -> dict[str, Any]:
    """The ok row's columns from one measurement: statistics, figures, memory, energy, flags."""
    stats = measured.stats
    figures = timed.figures(stats, measured.result)
    if timed.companion is not None:
        figures.update(timed.companion(measured))
    out = measured_row(stats, measured.plan, measured.samples_s)
    flags = quality_flags(stats, measured.plan, ctx.budget_for(case.case_id), timed.repeatable) + list(figures.pop("flags", []))
    out.update(figures)
    add_memory(out, timed, ctx)
    energy, energy_notes = energy_columns(timed, measured, ctx.energy, ctx.clock, ctx.build_index == 0, out)
    out.update(energy)
    if any(note.startswith("throttled") for note in energy_notes):
        flags.append("throttled")
    if measured.capped:
        flags.append("capped")
    out["first_call_s"] = measured.first_call_s
    impossible = impossible_figures(out, device_name, str(getattr(case, "dtype", "") or ""))
    warnings = [measured.capped] + timed.notes + impossible + energy_notes
    out.update(status="ok", reason="; ".join(filter(None, [str(figures.get("reason") or "")] + warnings)), flags=flags)
    return out


def measured_columns(case: Case, timed: Timed, ctx: BuildContext, rounds: Rounds | None, untimed: bool, device_name: str) -> dict[str, Any]:
    devices.reset_peak_memory(ctx.device)  # after the build: the peak is the timed region's own
    if untimed:  # --benchmark-disable: one untimed call (a smoke test), no samples
        timed.fn()
        return {"status": "ok", "reason": "untimed (--benchmark-disable)"}
    measured = measure(timed, ctx.budget_for(case.case_id), ctx.clock, rounds, ctx.energy, ctx.telemetry, ctx.share)
    return derive(case, timed, measured, ctx, device_name)


def failure_columns(error: Exception) -> tuple[dict[str, Any], Exception | None]:
    """The row's status for an exception of a build or measurement, and the exception to re-raise
    after the row is recorded (an unexpected failure: pytest reports it too)."""
    if isinstance(error, CaseSkipped):
        return {"status": "skipped", "reason": str(error)}, None
    if isinstance(error, OverBudget):
        return dict(error.columns, status="skipped", reason=str(error)), None
    if isinstance(error, Diverged):
        return dict(error.columns, status="failed", reason=f"{error.prefix}: {error}"), None
    if devices.is_out_of_memory(error):
        return {"status": "oom", "reason": one_line(error)}, None
    return {"status": "failed", "reason": one_line(error)}, error


def case_precision(case: Case) -> str | None:
    """The number format a case computes in: matmul-like cases name it `dtype`, training ones
    `precision` (fp32 / bf16 / fp16); None where a case names neither (DDP: fp32 in its workers)."""
    return getattr(case, "dtype", None) or getattr(case, "precision", None)


def check_known_cost(share: CaseShare | None) -> None:
    """A case whose share is too small, or whose first call this machine's history says does not
    fit its share, is not built."""
    if share is None:
        return
    if share.too_small():
        raise OverBudget(str(share.too_small()), None)
    if share.known_call_s is not None and share.known_call_s > share.share_s:
        raise OverBudget(share.over(share.known_call_s), None)


def run_case(case: Case, workload: Workload, ctx: BuildContext, base_row: dict[str, Any], record: Callable[[dict[str, Any]], None] | None,
             rounds: Rounds | None = None, untimed: bool = False) -> dict[str, Any]:
    """Run one build (ctx.build_index) of one case and hand its row to `record`; returns the row.
    Re-raises unexpected failures after recording them, so pytest reports them too."""
    row: dict[str, Any] = dict(base_row, timestamp_utc=utc_timestamp(), workload=case.workload, case_id=case.case_id,
                               build=ctx.build_index, builds=ctx.builds_of(workload))
    row.update(case.settings())
    # cuDNN TF32 set per case (build, warm-up and rounds), recorded, and restored after it
    row["cudnn_tf32"] = devices.cudnn_tf32_for(case_precision(case))
    restore_tf32 = devices.scope_cudnn_tf32(row["cudnn_tf32"])
    load = LoadMeter()
    timed: Timed | None = None
    failure: Exception | None = None
    started_s = time.monotonic()  # the build's wall seconds, kept as this machine's cost of the case (not a figure)
    try:  # an interrupt (Ctrl-C, SIGTERM) passes through, after the cleanup
        try:
            check_known_cost(ctx.share)
            timed = workload.build(case, ctx)
            row.update(measured_columns(case, timed, ctx, rounds, untimed, str(base_row.get("device_name", ""))))
        except Exception as error:  # noqa: BLE001 - every failure becomes a row
            columns, failure = failure_columns(error)
            row.update(columns)
    finally:
        if timed is not None and timed.cleanup is not None:
            timed.cleanup()
        timed = None
        restore_tf32()
        devices.empty_cache(ctx.device, collect=row.get("status") in ("failed", "oom"))
    record_load(row, load.busy_frac(), ctx.device)
    row["build_s"] = time.monotonic() - started_s
    if record is not None and not untimed:
        record(row)
        ctx.run_rows.append(row)
    if failure is not None:
        raise failure
    return row
