"""Collectives over a ladder of sizes, with nccl-tests' algbw, busbw and `#wrong`. Process start
costs seconds, so one torchrun launch per build times every case and each case takes its result once
(a rerun launches afresh)."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.distributed as dist

from gpubench.harness.core.flags import BUSY
from gpubench.harness.measurement.cases import Case, CaseSkipped, Diverged
from gpubench.harness.catalog.collectives import (
    ELEMENT_BYTES,
    OPS,
    SPEC,
    algbw_gbps,
    bus_factor,
    elements,
)
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.devices.machine_load import BUSY_FRAC, LoadMeter
from gpubench.harness.measurement.measure import Timed
from gpubench.harness.core.plan import RoundPlan
from gpubench.harness.budget.shares import CaseShare, OverBudget
from gpubench.harness.measurement.runner import failure_result
from gpubench.harness.records.row import CaseResult, MeasuredColumns, Status
from gpubench.harness.core.stats import SampleStats, summarize
from gpubench.harness.budget.cost_model import Work
from gpubench.harness.measurement.workload import Workload
from gpubench.harness.core.workload_spec import bytes_size
from gpubench.harness.workloads.common.torchrun_launch import (
    COLLECTIVE_TIMEOUT_S,
    HEARTBEAT_STALL_S,
    LAUNCH_TIMEOUT_S,
    WORKDIR_PREFIX,
    budgeted_launch,
    sweep_stale_workdirs,
    torchrun_command,
)

WORKER = "gpubench.harness.workloads.collectives_worker"
KiB, MiB, GiB = 2**10, 2**20, 2**30
# Bytes per case: small sizes measure latency, large ones the link; the CPU's keep quick's launch
# within seconds.
LADDERS: dict[tuple[str, str], tuple[int, ...]] = {
    ("smoke", "cpu"): (1 * KiB, 64 * KiB),
    ("smoke", "cuda"): (1 * KiB, 1 * MiB),
    # gloo's latency and its bandwidth; ranks sharing 2 cores spread 10-90%
    ("quick", "cpu"): (32 * KiB, 32 * MiB),
    ("quick", "cuda"): (1 * KiB, 32 * KiB, 1 * MiB, 32 * MiB, 1 * GiB),
    # 1 KiB .. 256 MiB
    ("full", "cpu"): tuple(KiB * 4**k for k in range(10)),
    # 256 B .. 4 GiB
    ("full", "cuda"): tuple(256 * 4**k for k in range(13)),
}
# One rank's peak bytes in multiples of the size: the check's buffers, index, all_to_all chunks and
# masks (tests/test_collectives.py measures it on the CPU).
MEMORY_PER_SIZE = 4
SAMPLES_NOTE = (
    "samples: the slowest rank's seconds per call, per round (ranks start each round at a barrier)"
)
ENERGY_NOTE = (
    "energy: not measured for collectives (one launch times every size; other ranks' GPUs unread)"
)


@dataclass(frozen=True)
class CollectiveCase(Case):
    workload: ClassVar[str] = "collectives"
    op: str
    dtype: str
    # bytes, as nccl-tests sizes the operation
    size: int
    world_size: int
    backend: str


def ladder(profile: str, device_type: str) -> tuple[int, ...]:
    return LADDERS[(str(profile), "cuda" if device_type == "cuda" else "cpu")]


def cases(ctx: BuildContext) -> list[CollectiveCase]:
    backend = "nccl" if ctx.device.type == "cuda" else "gloo"
    sizes = ladder(ctx.profile, ctx.device.type)
    return [CollectiveCase(op, "fp32", size, ctx.nproc, backend) for op in OPS for size in sizes]


def memory_skip(size_bytes: int, device: torch.device) -> str | None:
    if device.type != "cuda":
        return None
    total, need = (
        torch.cuda.get_device_properties(device).total_memory,
        MEMORY_PER_SIZE * size_bytes,
    )
    if need <= total:
        return None
    return (
        f"{bytes_size(size_bytes)} needs about {need / GiB:.1f} GiB per GPU ({MEMORY_PER_SIZE}x "
        f"the size); this GPU has {total / GiB:.0f} GiB"
    )


def skip_reason(case: CollectiveCase, device: torch.device) -> str | None:
    if device.type not in ("cpu", "cuda"):
        return (
            "collectives run on cpu (gloo) or cuda (nccl): torch.distributed has no backend for "
            f"{device.type}"
        )
    if case.world_size < 2:
        gpus = (
            f" (this machine has {torch.cuda.device_count()} GPU)" if device.type == "cuda" else ""
        )
        return f"collectives need two or more ranks: --nproc is {case.world_size}{gpus}"
    if case.backend == "nccl" and not dist.is_nccl_available():
        return "this torch was built without NCCL"
    if elements(case.op, case.size, case.world_size) == 0:
        return (
            f"{bytes_size(case.size)} holds less than one fp32 element per rank over "
            f"{case.world_size} ranks"
        )
    return memory_skip(case.size, device)


class WrongResult(Diverged):
    """A wrong result on a rank: a failed row, whatever its speed."""

    prefix = "wrong result"


def mismatch_text(point: dict[str, Any]) -> str:
    """'2048 elements wrong (nccl-tests' #wrong): rank 1: 1024 wrong, first at element 0: 4 instead
    of 3; ...'"""
    ranks = "; ".join(
        f"rank {rank:.0f}: {wrong:.0f} wrong, first at element {index:.0f}: {got:g} instead of "
        f"{want:g}"
        for rank, wrong, index, got, want in point["mismatches"][:4]
    )
    return (
        f"{point['wrong']} elements wrong (nccl-tests' #wrong) in {point['op']} of "
        f"{bytes_size(point['size'])}: {ranks} — the collective library, its transport or a "
        "device corrupted the data: rerun; if it repeats on GPUs, see whether nccl-tests alone "
        "reproduces it"
    )


def point_figures(
    case: CollectiveCase, point: dict[str, Any], stats: SampleStats
) -> dict[str, Any]:
    """algbw and busbw from the slowest rank's median time per call; a wrong result fails the
    row."""
    if point["wrong"]:
        raise WrongResult(mismatch_text(point), {"wrong_elements": point["wrong"]})
    algbw = algbw_gbps(
        elements(case.op, case.size, case.world_size) * ELEMENT_BYTES, stats.median_s
    )
    # Cases are recorded after the launch ended, so their own load reading would miss it: the
    # launch's is carried.
    busy_frac = point.get("launch_busy_frac", 0.0)
    busy = (
        [f"other processes used {busy_frac:.0%} of the CPU during the launch"]
        if busy_frac > BUSY_FRAC
        else []
    )
    return {
        "algbw_gbps": algbw,
        "busbw_gbps": algbw * bus_factor(case.op, case.world_size),
        "wrong_elements": 0,
        "iterations": point["iterations"],
        "round_s": stats.median_s * point["iterations"],
        # this process's memory is not the ranks'
        "peak_mem_bytes": None,
        "mem_source": None,
        "flags": [BUSY] if busy else [],
        "reason": "; ".join([SAMPLES_NOTE, *busy]),
    }


def point_result(case: CollectiveCase, point: dict[str, Any]) -> CaseResult:
    """A standalone worker's result (collectives_worker --results-dir): measurement and figures, or
    failed."""
    stats = summarize(point["samples_s"])
    try:
        figures = dict(point_figures(case, point, stats))
    except WrongResult as wrong:
        return failure_result(wrong)[0]
    flags = tuple(figures.pop("flags"))
    return CaseResult(
        Status("ok", "", flags),
        MeasuredColumns(stats, point["iterations"], point["samples_s"]),
        figures=figures,
    )


@dataclass(frozen=True)
class LaunchKey:
    """One launch: every size of every collective a build process runs on one set of ranks."""

    device_type: str
    profile: str
    build: int
    world_size: int
    backend: str
    sizes: tuple[int, ...]
    worker: str

    def points(self) -> set[tuple[str, int]]:
        """(op, size) of every result the launch reports (not sizes below one element per chunk)."""
        return {
            (op, size) for op in OPS for size in self.sizes if elements(op, size, self.world_size)
        }


@dataclass
class Launched:
    points: dict[tuple[str, int], dict[str, Any]]
    error: str = ""
    # other processes' share of the CPU during the launch
    busy_frac: float = 0.0
    taken: set[tuple[str, int]] = field(default_factory=set)
    # stopped at its cases' share of a run budget: they are skipped, not failed
    over_budget: bool = False


_LAUNCHED: dict[LaunchKey, Launched] = {}


def launch_key(case: CollectiveCase, ctx: BuildContext, worker: str) -> LaunchKey:
    sizes = tuple(
        s for s in ladder(ctx.profile, ctx.device.type) if memory_skip(s, ctx.device) is None
    )
    return LaunchKey(
        ctx.device.type,
        str(ctx.profile),
        ctx.build_index,
        case.world_size,
        case.backend,
        sizes,
        worker,
    )


def launch_ladder(key: LaunchKey, share: CaseShare | None = None) -> Launched:
    """One launch through the DDP workload's launcher; under a run budget it serves every point, so
    it may take the first case's share once per point."""
    sweep_stale_workdirs()
    # The ddp workdirs' prefix: their sweep removes one a killed run left.
    workdir = Path(tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}collectives-"))
    load = LoadMeter()
    points_share = (
        None if share is None else CaseShare(share.left_s() * len(key.points()), share.budget_s)
    )
    try:
        result_json = workdir / "rank0.json"
        command = torchrun_command(
            key.worker,
            key.world_size,
            result_json,
            COLLECTIVE_TIMEOUT_S[key.profile],
            f"--device-type={key.device_type}",
            f"--profile={key.profile}",
            f"--ops={','.join(OPS)}",
            f"--sizes={','.join(map(str, key.sizes))}",
        )
        report = budgeted_launch(
            command,
            result_json,
            LAUNCH_TIMEOUT_S[key.profile],
            HEARTBEAT_STALL_S[key.profile],
            points_share,
        )
    except OverBudget as over:
        return Launched(
            {}, error=f"{over} (one launch for its {len(key.points())} cases)", over_budget=True
        )
    # every case of the launch fails with its reason
    except Exception as error:
        return Launched({}, error=" ".join(str(error).split()) or type(error).__name__)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return Launched(
        {(point["op"], point["size"]): point for point in report["points"]},
        busy_frac=load.busy_frac(),
    )


def take_point(case: CollectiveCase, ctx: BuildContext, worker: str) -> dict[str, Any]:
    """This case's result from the build's launch, launching when none holds it untaken."""
    key = launch_key(case, ctx, worker)
    launched = _LAUNCHED.get(key)
    if launched is None or (case.op, case.size) in launched.taken:
        launched = _LAUNCHED[key] = launch_ladder(key, ctx.share)
    launched.taken.add((case.op, case.size))
    # every case has its result: nothing is kept past them
    if launched.taken >= key.points():
        del _LAUNCHED[key]
    if launched.error:
        raise (
            OverBudget(launched.error, None)
            if launched.over_budget
            else RuntimeError(launched.error)
        )
    point = launched.points.get((case.op, case.size))
    if point is None:
        raise RuntimeError(f"the launch reported no result for {case.case_id}")
    return dict(point, launch_busy_frac=launched.busy_frac)


def set_up(case: CollectiveCase, ctx: BuildContext, worker: str = WORKER) -> Timed:
    """`worker`: the module torchrun starts on every rank (a test passes one with a broken
    collective)."""
    if reason := skip_reason(case, ctx.device):
        raise CaseSkipped(reason)
    return Timed(
        fn=lambda: take_point(case, ctx, worker),
        plan=RoundPlan(0, 1, 1, 0.0),
        figures=lambda stats, point: point_figures(case, point, stats),
        windows=lambda point: point["samples_s"],
        energy=False,
        energy_note=ENERGY_NOTE,
    )


def headline(cases: list[CollectiveCase]) -> list[CollectiveCase]:
    """all_reduce at the largest size: the summary's bus bandwidth row."""
    reduce = [c for c in cases if c.op == "all_reduce"]
    return [max(reduce, key=lambda c: c.size)] if reduce else []


def work(case: CollectiveCase, ctx: BuildContext) -> Work:
    """The build's first case launches the ranks for every size; the headline case runs first, so it
    carries it."""
    first = case.op == "all_reduce" and case.size == max(ladder(ctx.profile, ctx.device.type))
    return Work(
        bytes=case.size * 2 * case.world_size, launches=10, processes=2 if first else 0, calls=1
    )


WORKLOAD = Workload(SPEC, cases, set_up, headline, work)
