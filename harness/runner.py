"""Runs one build of a case end to end: build, warm up, time through pytest-benchmark, derive
figures and flags, write the row. Every outcome (ok, skipped, oom, failed) becomes a row.

The workload protocol (every module in harness/workloads that a bench runs):

    cases(ctx: BuildContext) -> list[Case]      the cases for ctx.profile on ctx.device
    build(case, ctx: BuildContext) -> Timed     fresh tensors/model for one independent build
    BUILDS: dict[str, int]                      (optional) independent builds per profile

Everything a build needs (device, profile, the synced clock, training data, nproc, the rows
already written in this run) comes through the one BuildContext.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any, Callable, Protocol

import torch

from harness import device as devices
from harness.cases import BUDGETS, Case, CaseSkipped
from harness.energy import EnergyMeter, EnergyReading, TelemetrySampler
from harness.env import gpu_other_processes
from harness.peaks import peak_gbps, peak_tflops
from harness.results import ResultsWriter, utc_timestamp
from harness.stats import NOISY_REL_IQR, SampleStats, summarize
from harness.timing import Budget, RoundPlan, SyncedClock, plan_rounds, sample, warm_up
from harness.workloads.data_source import DataSource

# Independent builds per case and profile (fresh tensors/model each), unless a workload says
# otherwise: `compare` judges a change against the spread between builds, not between rounds.
DEFAULT_BUILDS = {"smoke": 1, "quick": 3, "full": 7}
BUSY_FRAC = 0.25  # other processes took more than this share of the machine's CPU during the case


class Diverged(Exception):
    """Raised by a workload's figures when training diverged: the row is `failed`, never fastest.
    `columns` still land in the row (e.g. the target a run did not reach)."""

    prefix = "diverged"

    def __init__(self, message: str, columns: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.columns = columns or {}


class DidNotConverge(Diverged):
    """A run that never reached its target accuracy within its cap: `failed`, counted as slowest."""

    prefix = "did not converge"


@dataclass
class Timed:
    """What a workload's build step hands the runner.

    fn: the region to time (device work it queues is covered by the synced clock).
    figures: derives columns (tflops, gbps, accuracy...) from the statistics and fn's last result;
        may add `flags` (a list) and `reason` (text).
    plan: a fixed plan (e.g. one full epoch, no warm-up epoch); None plans from a warm-up of fn.
    warmup: a cheaper warm-up than fn itself (e.g. a few training steps before a timed epoch).
    windows: raw samples taken from fn's result instead of the rounds (an epoch timed in windows
        of steps); the row's statistics are then over those windows.
    cleanup: always called at the end (restores global flags such as TF32).
    cpu_memory: one untimed call of this under the allocator profiler gives the cpu peak memory.
    energy_alias: a column that also holds the energy of one call (a run to a target accuracy:
        energy_to_target_j).
    energy: False where the region's joules would not be the case's (a DDP launch: mostly process
        start, and ranks on other GPUs unread); `energy_note` says why in the row.
    samples_per_call: samples one call processes, where its throughput figure covers only part of
        the call (an epoch's samples_per_s is over training, its energy over training and eval):
        samples_per_j is then samples / joules of the call.
    """

    fn: Callable[[], Any]
    figures: Callable[[SampleStats, Any], dict[str, Any]] = lambda stats, result: {}
    plan: RoundPlan | None = None
    warmup: Callable[[], Any] | None = None
    windows: Callable[[Any], list[float]] | None = None
    cleanup: Callable[[], None] | None = None
    cpu_memory: Callable[[], Any] | None = None
    notes: list[str] = field(default_factory=list)
    energy_alias: str | None = None
    energy: bool = True
    energy_note: str = ""
    samples_per_call: int | None = None


@dataclass
class BuildContext:
    """What every workload's `cases` and `build` receive."""

    device: torch.device
    profile: str
    clock: SyncedClock
    nproc: int = 1
    data_source: Callable[[], DataSource] | None = None
    run_rows: list[dict[str, Any]] = field(default_factory=list)  # rows already written in this run
    progress: Callable[[int, int], None] | None = None  # long cases report (done, total) here
    energy: EnergyMeter = field(default_factory=lambda: EnergyMeter(None))  # joules over each timed region
    telemetry: TelemetrySampler | None = None  # GPU clocks/temperature/power/throttling during each region
    target_accuracy: float | None = None  # --target-accuracy (None: the dataset's default)
    build_index: int = 0  # which independent build is running (a time-to-accuracy run's seed)

    @property
    def data(self) -> DataSource:
        if self.data_source is None:
            raise RuntimeError("this workload needs training data but the context has none")
        return self.data_source()

    @property
    def budget(self) -> Budget:
        return BUDGETS[self.profile]


class Workload(Protocol):
    def cases(self, ctx: BuildContext) -> list[Case]: ...

    def build(self, case: Case, ctx: BuildContext) -> Timed: ...


def builds_for(workload: ModuleType | Workload, profile: str) -> int:
    return int(getattr(workload, "BUILDS", DEFAULT_BUILDS)[profile])


@dataclass
class RunContext:
    build: BuildContext
    base_row: dict[str, Any]
    writer: ResultsWriter | None


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
    return {
        "rounds": stats.rounds,
        "iterations": plan.iterations,
        "median_s": stats.median_s,
        "iqr_s": stats.iqr_s,
        "min_s": stats.min_s,
        "mean_s": stats.mean_s,
        "stddev_s": stats.stddev_s,
        "cv": stats.cv,
        "rel_iqr": stats.rel_iqr,
        "iqr_outliers": stats.iqr_outliers,
        "stddev_outliers": stats.stddev_outliers,
        "round_s": stats.median_s * plan.iterations,
        "samples_s": samples_s,
    }


class LoadMeter:
    """The share of the machine's CPU that other processes used during a case (a busy neighbour
    changes results many-fold) — system CPU time minus this process tree's, over wall time."""

    def __init__(self) -> None:
        self.start_wall = time.monotonic()
        self.start_system, self.start_own = self._system_s(), self._own_s()

    @staticmethod
    def _system_s() -> float:
        import psutil

        times = psutil.cpu_times()
        return float(times.user + times.system + getattr(times, "nice", 0.0))

    @staticmethod
    def _own_s() -> float:
        import psutil

        me = psutil.Process()
        total = sum(me.cpu_times()[:2])
        for child in me.children(recursive=True):
            try:
                total += sum(child.cpu_times()[:2])
            except psutil.Error:
                continue
        return total + sum(os.times()[2:4])  # children already reaped (DataLoader workers, torchrun)

    def busy_frac(self) -> float:
        wall_s = time.monotonic() - self.start_wall
        if wall_s <= 0:
            return 0.0
        others_s = (self._system_s() - self.start_system) - (self._own_s() - self.start_own)
        return min(1.0, max(0.0, others_s / (wall_s * (os.cpu_count() or 1))))


def cpu_peak_bytes(fn: Callable[[], Any]) -> int:
    """Allocator-level peak of one call on the CPU: torch.profiler's allocation records summed in
    time order, above what was alive when the call started (process RSS would count the whole
    process: datasets, libraries, earlier cases)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    records = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events() if e.name() == "[memory]")
    current = peak = 0
    for _, nbytes in records:
        current += nbytes
        peak = max(peak, current)
    return peak


HEADLINES = (("tflops", "{:.3g} TFLOP/s"), ("gbps", "{:.3g} GB/s"), ("epoch_s", "epoch {:.3g} s"),
             ("time_to_target_s", "{:.3g} s to target"), ("epochs_to_target", "{:.2g} epochs"),
             ("samples_per_s", "{:.4g} samples/s"), ("test_accuracy", "accuracy {:.3f}"), ("data_wait_frac", "data wait {:.0%}"),
             ("speedup", "speedup {:.3g}x"), ("scaling_efficiency", "scaling efficiency {:.2f}"),
             ("selfcheck_tub_ratio", "harness/torch.utils.benchmark {:.3f}"), ("selfcheck_events_ratio", "harness/CUDA events {:.3f}"),
             ("energy_j", "{:.3g} J"), ("avg_power_w", "{:.3g} W"))


def summary_line(row: dict[str, Any]) -> str:
    """One line per finished case for the terminal: status, median and the headline figures."""
    build = f" [build {row['build'] + 1}/{row['builds']}]" if row.get("builds", 1) > 1 else ""
    if row.get("status") != "ok":
        return f"{row['case_id']}{build}: {row['status']} — {row.get('reason', '')}"
    figures = [fmt.format(row[key]) for key, fmt in HEADLINES if isinstance(row.get(key), (int, float)) and not isinstance(row.get(key), bool)]
    median_s = row["median_s"]
    median = f"{median_s:.3g} s" if median_s >= 1 else f"{median_s * 1e3:.3g} ms"
    flags = f" [{row['flags']}]" if row.get("flags") else ""
    return f"{row['case_id']}{build}: median {median} over {row['rounds']} sample(s){flags}; " + ", ".join(figures)


def one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return f"{type(error).__name__}: {text}"[:300]


class Region:
    """Energy and telemetry over the timed rounds only: warm-up and calibration stay outside."""

    def __init__(self, meter: EnergyMeter, sampler: TelemetrySampler | None) -> None:
        self.meter, self.sampler = meter, sampler
        self.reading = EnergyReading(None, 0.0)
        self.telemetry: dict[str, Any] = {}

    def __enter__(self) -> "Region":
        if self.sampler is not None:
            self.sampler.start()
        self._mark = self.meter.start()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.reading = self.meter.stop(self._mark)
        finally:  # the polling thread stops even when the counter read fails
            if self.sampler is not None:
                self.telemetry = self.sampler.stop()


def time_case(timed: Timed, benchmark: Any, budget: Budget, clock: SyncedClock, region: Region | None = None) -> tuple[RoundPlan, list[float], Any]:
    """Warm up outside the samples, then let pytest-benchmark drive the rounds with the synced
    clock installed as its timer (inside `region`, which reads energy and telemetry). Returns the
    plan, raw seconds-per-call samples, last result.
    With pytest-benchmark disabled, one untimed call (a smoke test) and no samples."""
    if benchmark.disabled:
        return RoundPlan(0, 1, 1, 0.0), [], timed.fn()
    if timed.plan is None:
        estimate_s = warm_up(timed.warmup or timed.fn, budget.warmup_calls, clock, budget.target_s)
        plan = plan_rounds(estimate_s, budget)
        if plan.iterations > 1:  # calibrate on one whole round (still warm-up): rounds must really last >= min_round_s
            plan = plan_rounds(sample(timed.fn, RoundPlan(0, plan.iterations, 1, estimate_s), clock)[0], budget)
    else:
        plan = timed.plan
        if plan.warmup_calls > 0:
            warm_up(timed.warmup or timed.fn, plan.warmup_calls, clock)
    region = region or Region(EnergyMeter(None), None)
    clock()  # the region starts on an idle device: work queued by warm-up is not its energy
    with region:
        result = benchmark.pedantic(timed.fn, rounds=plan.rounds, iterations=plan.iterations, warmup_rounds=0)
    return plan, list(benchmark.stats.stats.data), result


MAX_ENERGY_CALLS = 1_000_000


def energy_by_repetition(fn: Callable[[], Any], median_s: float, meter: EnergyMeter, clock: SyncedClock) -> EnergyReading:
    """A region too short for the counter, measured again for energy only: calls until the
    counter's window is filled (the device synced at each check, as at the timed rounds' edges;
    the calls double when the estimate from `median_s` was short); the reading is per call."""
    window_s = meter.min_window_s * 1.2
    batch = min(MAX_ENERGY_CALLS, max(1, math.ceil(window_s / max(median_s, 1e-9))))
    calls = 0
    clock()
    mark, start_s = meter.start(), clock()
    while True:
        for _ in range(batch):
            fn()
        calls += batch
        if clock() - start_s >= window_s or calls >= MAX_ENERGY_CALLS:
            break
        batch = calls
    reading = meter.stop(mark)
    return EnergyReading(reading.energy_j / calls if reading.energy_j is not None else None, reading.seconds / calls, reading.source, reading.reason)


def energy_figures(reading: EnergyReading, calls: int, out: dict[str, Any], samples_per_call: int | None = None) -> dict[str, Any]:
    """energy_j per call of the timed function (one matmul, one epoch, one run to target), the
    region's average power, and work per joule: TFLOP/s over watts (the region is all matmul), and
    samples over joules — of the call when its samples are known, else samples/s over watts."""
    if reading.energy_j is None:
        return {"energy_source": reading.source or None}
    power_w = reading.avg_power_w
    energy_j = reading.energy_j / calls
    figures: dict[str, Any] = {"energy_j": energy_j, "avg_power_w": power_w, "energy_source": reading.source}
    if power_w:
        if isinstance(out.get("tflops"), (int, float)):
            figures["tflop_per_j"] = out["tflops"] / power_w
        if samples_per_call:
            figures["samples_per_j"] = samples_per_call / energy_j
        elif isinstance(out.get("samples_per_s"), (int, float)):
            figures["samples_per_j"] = out["samples_per_s"] / power_w
    return figures


def _energy(timed: Timed, region: Region, plan: RoundPlan, stats: SampleStats, ctx: BuildContext, out: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The energy and telemetry columns of a measured case, and the reasons a reader must see.
    A region too short for the counter is repeated for its energy in the first build of a case
    only: on a GPU (1 s window) every later build would add over a second of full-power work."""
    telemetry = dict(region.telemetry)
    slowdown = telemetry.pop("gpu_slowdown", "")
    notes = [f"throttled during the timed region: {slowdown.replace(';', ', ')}"] if slowdown else []
    if not timed.energy:
        return dict(telemetry, energy_source=None), ([timed.energy_note] if timed.energy_note and ctx.energy.available else []) + notes
    reading, calls = region.reading, plan.rounds * plan.iterations
    repeatable = timed.plan is None and timed.windows is None
    if reading.energy_j is None and reading.source and repeatable and ctx.build_index == 0:
        reading, calls = energy_by_repetition(timed.fn, stats.median_s, ctx.energy, ctx.clock), 1
    columns = energy_figures(reading, calls, out, timed.samples_per_call)
    if timed.energy_alias and columns.get("energy_j") is not None:
        columns[timed.energy_alias] = columns["energy_j"]
    columns.update(telemetry)
    if reading.reason and columns.get("energy_j") is None:
        notes.insert(0, reading.reason + (" (measured once per case, in its first build)" if repeatable else ""))
    return columns, notes


def _measure(case: Case, timed: Timed, benchmark: Any, ctx: BuildContext, row: dict[str, Any]) -> dict[str, Any]:
    """The ok path: time, summarize, derive figures, memory and flags; returns the columns."""
    devices.reset_peak_memory(ctx.device)  # after the build: the peak is the timed region's own
    region = Region(ctx.energy, ctx.telemetry)
    plan, samples_s, result = time_case(timed, benchmark, ctx.budget, ctx.clock, region)
    if benchmark.disabled:
        return {"status": "ok", "reason": "untimed (--benchmark-disable)"}
    if timed.windows is not None:
        samples_s = timed.windows(result)
    stats = summarize(samples_s)
    figures = timed.figures(stats, result)
    memory = devices.memory_snapshot(ctx.device)
    out = measured_row(stats, plan, samples_s)
    flags = quality_flags(stats, plan, ctx.budget, timed.plan is None and timed.windows is None) + list(figures.pop("flags", []))
    out.update(figures)
    out.setdefault("peak_mem_bytes", memory.peak_bytes)
    out.setdefault("mem_source", memory.source)
    if ctx.device.type == "cpu" and timed.cpu_memory is not None:
        out.update(peak_mem_bytes=cpu_peak_bytes(timed.cpu_memory), mem_source="cpu-profiler")
    out.update(mem_allocated_bytes=memory.allocated_bytes, mem_reserved_bytes=memory.reserved_bytes)
    energy, energy_notes = _energy(timed, region, plan, stats, ctx, out)
    out.update(energy)
    if any(note.startswith("throttled") for note in energy_notes):
        flags.append("throttled")
    warnings = timed.notes + impossible_figures(out, str(row.get("device_name", "")), str(getattr(case, "dtype", "") or "")) + energy_notes
    out.update(status="ok", reason="; ".join(filter(None, [str(figures.get("reason") or "")] + warnings)), flags=flags)
    benchmark.extra_info.update({k: v for k, v in figures.items() if isinstance(v, (int, float, str, bool))})
    benchmark.extra_info["case_id"] = case.case_id
    return out


def run_case(case: Case, workload: ModuleType | Workload, benchmark: Any, ctx: RunContext, build_index: int = 0) -> dict[str, Any]:
    """Run one build of one case and append its row; returns the row. Re-raises unexpected
    failures after recording them, so pytest reports them too. --benchmark-disable takes this
    same path (one untimed call, no row written)."""
    bctx = replace(ctx.build, build_index=build_index)
    row: dict[str, Any] = dict(ctx.base_row, timestamp_utc=utc_timestamp(), workload=case.workload, case_id=case.case_id,
                               build=build_index, builds=builds_for(workload, bctx.profile))
    row.update(case.settings())
    timed: Timed | None = None
    failure: BaseException | None = None
    load = LoadMeter()
    try:
        timed = workload.build(case, bctx)
        row.update(_measure(case, timed, benchmark, bctx, row))
    except CaseSkipped as skip:
        row.update(status="skipped", reason=str(skip))
    except Diverged as diverged:
        row.update(diverged.columns, status="failed", reason=f"{diverged.prefix}: {diverged}")
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
        devices.empty_cache(bctx.device)
    _record_load(row, load.busy_frac(), bctx.device)
    if ctx.writer is not None and not benchmark.disabled:
        ctx.writer.append(row)
        bctx.run_rows.append(row)
    if failure is not None:
        raise failure
    return row


def _record_load(row: dict[str, Any], busy_frac: float, device: torch.device) -> None:
    row["cpu_busy_frac"] = round(busy_frac, 4)
    flags = list(row.get("flags") or [])
    if device.type == "cuda":
        row["gpu_other_procs"] = gpu_other_processes(device.index or 0)
        if row["gpu_other_procs"]:
            flags.append("busy-gpu")
    if busy_frac > BUSY_FRAC:
        flags.append("busy")
    row["flags"] = ";".join(dict.fromkeys(flags))
