"""Runs one case end to end: build, warm up, time through pytest-benchmark, derive figures,
write the row. Every outcome (ok, skipped, oom, failed) becomes a row."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from harness import device as devices
from harness.cases import Case, CaseSkipped
from harness.env import gpu_telemetry
from harness.peaks import peak_gbps, peak_tflops
from harness.results import ResultsWriter, utc_timestamp
from harness.stats import SampleStats, summarize
from harness.timing import Budget, RoundPlan, plan_rounds, warm_up

CV_WARN = 0.05


@dataclass
class Timed:
    """What a workload's build step hands the runner.

    fn: the region to time (device work it queues is covered by the synced clock).
    figures: derives columns (tflops, gbps, accuracy...) from the statistics and fn's last result.
    plan: a fixed plan (e.g. one full epoch, no warm-up epoch); None plans from a warm-up of fn.
    warmup: a cheaper warm-up than fn itself (e.g. a few training steps before a timed epoch).
    cleanup: always called at the end (restores global flags such as TF32).
    """

    fn: Callable[[], Any]
    figures: Callable[[SampleStats, Any], dict[str, Any]] = lambda stats, result: {}
    plan: RoundPlan | None = None
    warmup: Callable[[], Any] | None = None
    cleanup: Callable[[], None] | None = None
    notes: list[str] = field(default_factory=list)


Build = Callable[[Case, torch.device, str], Timed]


@dataclass
class RunContext:
    device: torch.device
    profile: str
    budget: Budget
    base_row: dict[str, Any]
    writer: ResultsWriter | None


def quality_warnings(stats: SampleStats, figures: dict[str, Any], device_name: str, dtype: str) -> list[str]:
    """The suite says so when a figure cannot be trusted or cannot be right."""
    warnings = []
    if stats.rounds > 1 and stats.cv > CV_WARN:
        warnings.append(f"noisy: cv {stats.cv:.1%} > {CV_WARN:.0%}")
    peak = peak_tflops(device_name, dtype)
    tflops = figures.get("tflops")
    if peak and tflops and tflops > peak:
        warnings.append(f"impossible: {tflops:.1f} TFLOP/s is above the {dtype} datasheet peak {peak:.1f} — the timing missed device work")
    mem_peak = peak_gbps(device_name)
    gbps = figures.get("gbps")
    if mem_peak and gbps and gbps > mem_peak:
        warnings.append(f"above the memory datasheet peak {mem_peak:.0f} GB/s: cache-resident working set or broken timing")
    return warnings


def measured_row(stats: SampleStats, plan: RoundPlan, figures: dict[str, Any], samples_s: list[float]) -> dict[str, Any]:
    row = {
        "rounds": stats.rounds,
        "iterations": plan.iterations,
        "median_s": stats.median_s,
        "iqr_s": stats.iqr_s,
        "min_s": stats.min_s,
        "mean_s": stats.mean_s,
        "stddev_s": stats.stddev_s,
        "cv": stats.cv,
        "samples_s": samples_s,
    }
    row.update(figures)
    return row


def _telemetry(device: torch.device) -> dict[str, Any]:
    if device.type != "cuda":
        return {}
    reading = gpu_telemetry(device.index or 0)
    return {k: reading[k] for k in ("gpu_sm_clock_mhz", "gpu_temp_c", "gpu_power_w") if k in reading}


HEADLINES = (("tflops", "{:.3g} TFLOP/s"), ("gbps", "{:.3g} GB/s"), ("epoch_s", "epoch {:.3g} s"),
             ("samples_per_s", "{:.4g} samples/s"), ("test_accuracy", "accuracy {:.3f}"), ("data_wait_frac", "data wait {:.0%}"),
             ("speedup", "speedup {:.3g}x"), ("scaling_efficiency", "scaling efficiency {:.2f}"),
             ("selfcheck_tub_ratio", "harness/torch.utils.benchmark {:.3f}"), ("selfcheck_events_ratio", "harness/CUDA events {:.3f}"))


def summary_line(row: dict[str, Any]) -> str:
    """One line per finished case for the terminal: status, median and the headline figures."""
    if row.get("status") != "ok":
        return f"{row['case_id']}: {row['status']} — {row.get('reason', '')}"
    figures = [fmt.format(row[key]) for key, fmt in HEADLINES if isinstance(row.get(key), (int, float)) and not isinstance(row.get(key), bool)]
    median_s = row["median_s"]
    median = f"{median_s:.3g} s" if median_s >= 1 else f"{median_s * 1e3:.3g} ms"
    return f"{row['case_id']}: median {median} over {row['rounds']} round(s); " + ", ".join(figures)


def one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return f"{type(error).__name__}: {text}"[:300]


def time_case(timed: Timed, benchmark: Any, budget: Budget) -> tuple[RoundPlan, list[float], Any]:
    """Warm up outside the samples, then let pytest-benchmark drive the rounds with the synced
    clock installed as its timer. Returns the plan, raw seconds-per-call samples, last result."""
    if timed.plan is None:
        estimate_s = warm_up(timed.warmup or timed.fn, budget.warmup_calls, budget.target_s)
        plan = plan_rounds(estimate_s, budget)
    else:
        plan = timed.plan
        if plan.warmup_calls > 0:
            warm_up(timed.warmup or timed.fn, plan.warmup_calls)
    result = benchmark.pedantic(timed.fn, rounds=plan.rounds, iterations=plan.iterations, warmup_rounds=0)
    return plan, list(benchmark.stats.stats.data), result


def run_case(case: Case, build: Build, benchmark: Any, ctx: RunContext) -> dict[str, Any]:
    """Run one case and append its row; returns the row. Re-raises unexpected failures after
    recording them, so pytest reports them too."""
    row: dict[str, Any] = dict(ctx.base_row, timestamp_utc=utc_timestamp(), workload=case.workload, case_id=case.case_id)
    row.update(case.settings())
    timed: Timed | None = None
    failure: BaseException | None = None
    devices.reset_peak_memory(ctx.device)
    try:
        timed = build(case, ctx.device, ctx.profile)
        plan, samples_s, result = time_case(timed, benchmark, ctx.budget)
        stats = summarize(samples_s)
        figures = timed.figures(stats, result)
        memory = devices.memory_snapshot(ctx.device)
        row.update(measured_row(stats, plan, figures, samples_s))
        row.setdefault("peak_mem_bytes", memory.peak_bytes)
        row.update(mem_allocated_bytes=memory.allocated_bytes, mem_reserved_bytes=memory.reserved_bytes)
        warnings = timed.notes + quality_warnings(stats, figures, str(row.get("device_name", "")), str(getattr(case, "dtype", "")))
        row.update(status="ok", reason="; ".join(filter(None, [str(figures.get("reason") or "")] + warnings)))
        benchmark.extra_info.update({k: v for k, v in figures.items() if isinstance(v, (int, float, str, bool))})
        benchmark.extra_info["case_id"] = case.case_id
    except CaseSkipped as skip:
        row.update(status="skipped", reason=str(skip))
    except Exception as error:  # noqa: BLE001 - every failure becomes a row, then is re-raised
        if devices.is_out_of_memory(error):
            row.update(status="oom", reason=one_line(error))
        else:
            row.update(status="failed", reason=one_line(error))
            failure = error
    finally:
        if timed is not None and timed.cleanup is not None:
            timed.cleanup()
        timed = None
        devices.empty_cache(ctx.device)
    row.update(_telemetry(ctx.device))
    if ctx.writer is not None:
        ctx.writer.append(row)
    if failure is not None:
        raise failure
    return row
