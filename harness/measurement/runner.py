"""Runs one build of a case end to end (set up, measure, figures, memory, energy, flags) into a row
of the run's records. Every outcome (ok, skipped, unreached, oom, failed) becomes a row."""

from __future__ import annotations

import sys
import time
from typing import Any
from collections.abc import Callable

from gpubench.harness.devices import device as devices
from gpubench.harness.measurement.cases import Case, CaseSkipped, Diverged, Unreached
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.devices.device import cpu_peak_bytes
from gpubench.harness.measurement.energy_columns import energy_columns
from gpubench.harness.devices.machine_load import LoadMeter, load_of
from gpubench.harness.measurement.measure import Measurement, Rounds, Timed, measure
from gpubench.harness.core.bounds import past_bounds
from gpubench.harness.core.flags import (
    CAPPED,
    IMPOSSIBLE,
    NOISY,
    ONE_SAMPLE,
    SHORT_ROUNDS,
    THROTTLED,
)
from gpubench.harness.core.plan import BuildTiming, RoundPlan
from gpubench.harness.budget.shares import CaseShare, OverBudget
from gpubench.harness.budget.clock import DeadlinePassed
from gpubench.harness.records.results import utc_timestamp
from gpubench.harness.records.row import (
    CaseColumns,
    CaseResult,
    Columns,
    Load,
    MeasuredColumns,
    Memory,
    Row,
    Status,
)
from gpubench.harness.core.stats import NOISY_REL_CI95, SampleStats
from gpubench.harness.measurement.terminal import one_line
from gpubench.harness.measurement.workload import Workload


def quality_flags(
    stats: SampleStats, plan: RoundPlan, timing: BuildTiming, planned_here: bool
) -> list[str]:
    """Flags a reader must see beside the figure: noisy, one sample, rounds shorter than planned."""
    flags = []
    if stats.rounds == 1:
        flags.append(ONE_SAMPLE)
    elif stats.rel_ci95 > NOISY_REL_CI95:
        flags.append(NOISY)
    if planned_here and stats.median_s * plan.iterations < timing.min_round_s:
        flags.append(SHORT_ROUNDS)
    return flags


def standalone_row(base_row: Columns, case: Case, result: CaseResult) -> dict[str, Any]:
    """The row a torchrun worker run by hand writes itself: one build, no machine load or build cost
    measured."""
    identity = CaseColumns(
        utc_timestamp(), case.workload, case.case_id, 0, 1, case.settings(), None
    )
    return Row(base_row, identity, result, Load(None), None).columns()


def memory_part(figures: Columns, timed: Timed, ctx: BuildContext) -> Memory:
    """The timed region's memory; a workload's own peak wins, except over the CPU allocator
    profiler's."""
    memory = devices.memory_snapshot(ctx.device)
    peak_bytes, source = (
        figures.get("peak_mem_bytes", memory.peak_bytes),
        figures.get("mem_source", memory.source),
    )
    if ctx.device.type == "cpu" and timed.cpu_memory is not None:
        peak_bytes, source = cpu_peak_bytes(timed.cpu_memory), "cpu-profiler"
    return Memory(peak_bytes, source, memory.allocated_bytes, memory.reserved_bytes)


def derive(
    case: Case, timed: Timed, measured: Measurement, ctx: BuildContext, device_name: str
) -> CaseResult:
    """The ok result of one measurement: statistics, figures, memory, energy, flags."""
    stats = measured.stats
    figures = dict(timed.figures(stats, measured.result))
    if timed.companion is not None:
        figures = {**figures, **timed.companion(measured)}
    workload_flags = list(figures.pop("flags", []))
    workload_reason = str(figures.pop("reason", None) or "")
    flags = (
        quality_flags(stats, measured.plan, ctx.timing_for(case.case_id), timed.repeatable)
        + workload_flags
    )
    memory = memory_part(figures, timed, ctx)
    energy, energy_notes = energy_columns(timed, measured, ctx.energy, figures)
    if any(note.startswith(THROTTLED) for note in energy_notes):
        flags.append(THROTTLED)
    if measured.capped:
        flags.append(CAPPED)
    # each figure past its bound, said: the row is flagged and kept, and the report leaves it out of
    # its summary
    impossible = past_bounds(figures, device_name, str(getattr(case, "dtype", "") or ""))
    if impossible:
        flags.append(IMPOSSIBLE)
    warnings = [measured.capped] + timed.notes + impossible + energy_notes
    status = Status("ok", "; ".join(filter(None, [workload_reason] + warnings)), tuple(flags))
    measurement = MeasuredColumns(stats, measured.plan.iterations, measured.samples_s)
    return CaseResult(status, measurement, measured.first_call_s, figures, memory, energy)


def energy_not_repeated(ctx: BuildContext) -> str | None:
    """Why a region too short for the energy counter is not repeated (None: it is, where it
    fits)."""
    if ctx.profile == "smoke":
        return "not repeated for energy in the smoke profile"
    return "measured once per case, in its first build" if ctx.build_index > 0 else None


def measured_result(
    case: Case,
    timed: Timed,
    ctx: BuildContext,
    rounds: Rounds | None,
    untimed: bool,
    device_name: str,
) -> CaseResult:
    # after the build: the peak is the timed region's own
    devices.reset_peak_memory(ctx.device)
    # --benchmark-disable: one untimed call (a smoke test), no samples
    if untimed:
        timed.fn()
        return CaseResult(Status("ok", "untimed (--benchmark-disable)"))
    measured = measure(
        timed,
        ctx.timing_for(case.case_id),
        ctx.clock,
        rounds,
        ctx.energy,
        ctx.telemetry,
        ctx.share,
        why_not_repeated=energy_not_repeated(ctx),
    )
    return derive(case, timed, measured, ctx, device_name)


def failure_result(error: BaseException) -> tuple[CaseResult, BaseException | None]:
    """The result of a build that raised, keeping the columns its error carries, and the exception
    to re-raise after recording (an unexpected failure, which pytest reports too)."""
    if isinstance(error, CaseSkipped):
        return CaseResult(Status("skipped", str(error))), None
    if isinstance(error, OverBudget):
        return CaseResult(
            Status("skipped", str(error), error.flags), figures=dict(error.columns)
        ), None
    # what it measured is kept: a row of its own, neither a figure nor a failure
    if isinstance(error, Unreached):
        return CaseResult(Status("unreached", str(error)), figures=dict(error.columns)), None
    # recorded, then the test is cut too: the run is past its end
    if isinstance(error, DeadlinePassed):
        return CaseResult(Status("failed", str(error))), error
    # pytest.skip() in a user's step: the row says so, then pytest does
    if isinstance(error, pytest_skip()):
        return CaseResult(Status("skipped", str(getattr(error, "msg", "") or error))), error
    # pytest.fail(), pytest-timeout's cut (BaseExceptions): recorded, re-raised
    if not isinstance(error, Exception):
        return CaseResult(Status("failed", one_line(error))), error
    if isinstance(error, Diverged):
        return CaseResult(
            Status("failed", f"{error.prefix}: {error}"), figures=dict(error.columns)
        ), None
    if devices.is_out_of_memory(error):
        return CaseResult(Status("oom", one_line(error))), None
    return CaseResult(Status("failed", one_line(error))), error


def pytest_skip() -> type[BaseException] | tuple[()]:
    """pytest.skip()'s exception (its public name), where pytest runs this case; the harness runs
    without it too."""
    skip = getattr(sys.modules.get("pytest"), "skip", None)
    return getattr(skip, "Exception", None) or ()


def check_known_cost(share: CaseShare | None) -> None:
    """Refuses to build a case whose share is too small, or whose known first call does not fit
    it."""
    if share is None:
        return
    if share.left_out:
        raise OverBudget(share.left_out, None, left_out=True)
    if share.too_small():
        raise OverBudget(str(share.too_small()), None)
    if share.known_call_s is not None and share.known_call_s > share.share_s:
        raise OverBudget(share.over(share.known_call_s), None)


def run_case(
    case: Case,
    workload: Workload,
    ctx: BuildContext,
    base_row: dict[str, Any],
    record: Callable[[dict[str, Any]], None] | None,
    rounds: Rounds | None = None,
    untimed: bool = False,
) -> dict[str, Any]:
    """Runs build ctx.build_index of a case and hands its row to `record`; unexpected failures
    re-raise after."""
    # cuDNN TF32 set per case (build, warm-up and rounds), recorded, and restored after it; its
    # number format is `dtype` (matmul-like) or `precision` (training), neither for DDP
    precision = getattr(case, "dtype", None) or getattr(case, "precision", None)
    identity = CaseColumns(
        utc_timestamp(),
        case.workload,
        case.case_id,
        ctx.build_index,
        ctx.builds_of(workload),
        case.settings(),
        devices.cudnn_tf32_for(precision),
    )
    restore_tf32 = devices.scope_cudnn_tf32(identity.cudnn_tf32)
    load = LoadMeter()
    timed: Timed | None = None
    result: CaseResult | None = None
    failure: BaseException | None = None
    # the build's wall seconds: this machine's cost of the case (not a figure)
    started_s = time.monotonic()
    # an interrupt (Ctrl-C, SIGTERM) passes through, after the cleanup
    try:
        try:
            check_known_cost(ctx.share)
            timed = workload.set_up(case, ctx)
            result = measured_result(
                case, timed, ctx, rounds, untimed, str(base_row.get("device_name", ""))
            )
        # Ctrl-C, SIGTERM (StopSignal), exit: no row
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        # every other end becomes a row: pytest's outcomes too
        except BaseException as error:
            result, failure = failure_result(error)
    finally:
        if timed is not None and timed.cleanup is not None:
            timed.cleanup()
        timed = None
        restore_tf32()
        devices.empty_cache(
            ctx.device, collect=result is not None and result.status.status in ("failed", "oom")
        )
    machine_load = load_of(load.busy_frac(), ctx.device)
    predicted_s = ctx.share.predicted_build_s if ctx.share is not None else None
    row = Row(
        base_row, identity, result, machine_load, time.monotonic() - started_s, predicted_s
    ).columns()
    if record is not None and not untimed:
        record(row)
        ctx.run_rows.append(row)
    if failure is not None:
        raise failure
    return row
