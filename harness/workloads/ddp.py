"""Multi-device training: DDP under torchrun against one process, and DataParallel."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import median
from typing import Any, ClassVar

import torch

from gpubench.harness.measurement.cases import Case, CaseSkipped
from gpubench.harness.catalog.ddp import SPEC
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.devices.data_source import DataSource, PreloadedLoader
from gpubench.harness.measurement.measure import Timed
from gpubench.harness.core.plan import RoundPlan
from gpubench.harness.core.stats import SampleStats
from gpubench.harness.budget.cost_model import Work
from gpubench.harness.measurement.workload import Workload
from gpubench.harness.workloads.common.models import (
    CNN_EFFICIENCY,
    CNN_STEP_LAUNCHES,
    CNN_TRAIN_FLOPS,
    make_model,
)
from gpubench.harness.workloads.common.train_loop import Trainer
from gpubench.harness.workloads.common.torchrun_launch import (
    COLLECTIVE_TIMEOUT_S,
    HEARTBEAT_STALL_S,
    LAUNCH_TIMEOUT_S,
    WORKDIR_PREFIX,
    budgeted_launch,
    sweep_stale_workdirs,
    torchrun_command,
)

# Per-rank steps per profile (0 = the full epoch of the rank's shard).
MAX_STEPS = {"smoke": 5, "quick": 40, "full": 0}
PER_RANK_BATCH = 128
# what torchrun starts on every rank
WORKER_MODULE = "gpubench.harness.workloads.ddp_worker"


@dataclass(frozen=True)
class DistributedCase(Case):
    workload: ClassVar[str] = "ddp"
    # ddp | dataparallel
    parallel: str
    world_size: int
    backend: str
    # per rank (ddp) or per GPU share of the global batch (dataparallel)
    batch_size: int


def cases(ctx: BuildContext) -> list[DistributedCase]:
    nproc, device = ctx.nproc, ctx.device
    backend = "nccl" if device.type == "cuda" else "gloo"
    return [DistributedCase("ddp", n, backend, PER_RANK_BATCH) for n in sorted({1, nproc})] + [
        DistributedCase("dataparallel", max(nproc, 2), "single-process", PER_RANK_BATCH)
    ]


def ddp_command(
    case: DistributedCase,
    device: torch.device,
    data: DataSource,
    max_steps: int,
    result_json: Path,
    collective_timeout_s: float = COLLECTIVE_TIMEOUT_S["full"],
) -> list[str]:
    return torchrun_command(
        WORKER_MODULE,
        case.world_size,
        result_json,
        collective_timeout_s,
        f"--batch-size={case.batch_size}",
        f"--max-steps={max_steps}",
        f"--device-type={'cuda' if device.type == 'cuda' else 'cpu'}",
        f"--dataset={data.dataset}",
        f"--data-root={data.root}",
    )


def single_process_samples_per_s(case: DistributedCase, rows: list[dict[str, Any]]) -> float | None:
    """The one-process baseline for `case` from the rows already written in this run."""
    same = [
        r["samples_per_s"]
        for r in rows
        if r.get("workload") == "ddp"
        and r.get("status") == "ok"
        and r.get("parallel") == "ddp"
        and r.get("world_size") == 1
        and r.get("backend") == case.backend
        and r.get("batch_size") == case.batch_size
        and r.get("samples_per_s")
    ]
    return median(same) if same else None


def ddp_build(case: DistributedCase, ctx: BuildContext) -> Timed:
    device, data = ctx.device, ctx.data
    sweep_stale_workdirs()
    timeout_s, collective_s = LAUNCH_TIMEOUT_S[ctx.profile], COLLECTIVE_TIMEOUT_S[ctx.profile]
    stall_s, max_steps = HEARTBEAT_STALL_S[ctx.profile], MAX_STEPS[ctx.profile]
    # removed by the Timed's cleanup (the runner's finally)
    workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))
    # resolving the dataset may fail
    try:
        command = ddp_command(case, device, data, max_steps, workdir / "rank0.json", collective_s)
    except BaseException:
        # no Timed yet, so no cleanup would remove it
        shutil.rmtree(workdir, ignore_errors=True)
        raise

    def baseline() -> tuple[float | None, str]:
        """Samples/s of one process: from this run's rows, else measured now (whatever -k
        selects)."""
        if case.world_size == 1:
            return None, ""
        found = single_process_samples_per_s(case, ctx.run_rows)
        if found:
            return found, "scaling baseline: this run's world_size=1 row"
        single_json = workdir / "single.json"
        single = ddp_command(
            replace(case, world_size=1), device, data, max_steps, single_json, collective_s
        )
        # under a run budget it ends with the case's share, as the case's own launch does
        report = budgeted_launch(single, single_json, timeout_s, stall_s, ctx.share)
        return report["samples"] / report["train_s"], (
            "scaling baseline: one process measured for this case (no world_size=1 row in this run)"
        )

    def figures(stats: SampleStats, report: dict[str, Any]) -> dict[str, Any]:
        samples_per_s = report["samples"] / report["train_s"]
        single, source = (samples_per_s, "") if case.world_size == 1 else baseline()
        efficiency = samples_per_s / (case.world_size * single) if single else None
        # past MAX_SCALING_EFFICIENCY (gpubench.harness.core.bounds) the runner flags the row
        # impossible
        notes = ["samples are rank 0's step times; peak memory is rank 0's", source]
        return {
            "dataset": report["dataset"],
            "samples_per_s": samples_per_s,
            "samples_per_s_per_rank": samples_per_s / case.world_size,
            "step_s": stats.median_s,
            "scaling_efficiency": efficiency,
            "effective_batch": case.batch_size * case.world_size,
            "peak_mem_bytes": report["peak_mem_bytes"],
            "reason": "; ".join(filter(None, notes)),
        }

    return Timed(
        fn=lambda: budgeted_launch(command, workdir / "rank0.json", timeout_s, stall_s, ctx.share),
        figures=figures,
        plan=RoundPlan(0, 1, 1, 0.0),
        windows=lambda report: report["step_samples_s"],
        cleanup=lambda: shutil.rmtree(workdir, ignore_errors=True),
        energy=False,
        energy_note=DDP_ENERGY_NOTE,
    )


# The timed call is a whole torchrun launch (process start, imports, data, warm-up), and one GPU's
# counter would miss the other ranks': its joules would not be the steps'.
DDP_ENERGY_NOTE = (
    "energy: not measured for a DDP launch (mostly process start-up; other ranks' GPUs unread)"
)


def dataparallel_build(case: DistributedCase, ctx: BuildContext) -> Timed:
    device, profile, data = ctx.device, ctx.profile, ctx.data
    if device.type != "cuda" or torch.cuda.device_count() < 2:
        have = torch.cuda.device_count() if torch.cuda.is_available() else 0
        raise CaseSkipped(f"DataParallel needs two or more GPUs (this machine has {have})")
    global_batch = case.batch_size * case.world_size
    model = torch.nn.DataParallel(make_model("cnn"), device_ids=list(range(case.world_size)))
    trainer = Trainer(model, device, clock=ctx.clock)
    loader = PreloadedLoader(*data.preloaded(True, device), global_batch, shuffle=True)
    steps = MAX_STEPS[profile] or len(loader)

    def run() -> int:
        seen = 0
        for i, batch in enumerate(loader):
            if i >= steps:
                break
            trainer.step([batch])
            seen += batch[1].shape[0]
        return seen

    def figures(stats: SampleStats, seen: int) -> dict[str, Any]:
        samples_per_s = seen / stats.median_s
        return {
            "dataset": data.dataset,
            "samples_per_s": samples_per_s,
            "samples_per_s_per_rank": samples_per_s / case.world_size,
            "step_s": stats.median_s / steps,
            "effective_batch": global_batch,
        }

    first = next(iter(loader))
    return Timed(
        fn=run,
        figures=figures,
        plan=RoundPlan(1, 1, 1, 0.0),
        warmup=lambda: trainer.step([first]),
        energy=False,
        energy_note="energy: not measured for DataParallel (one GPU's counter of several)",
    )


def set_up(case: DistributedCase, ctx: BuildContext) -> Timed:
    return (dataparallel_build if case.parallel == "dataparallel" else ddp_build)(case, ctx)


def headline(cases: list[DistributedCase]) -> list[DistributedCase]:
    """DDP at one process and at every process: the summary's scaling row."""
    return [c for c in cases if c.parallel == "ddp"]


def work(case: DistributedCase, ctx: BuildContext) -> Work:
    """One torchrun launch: its start (launcher, then ranks importing torch) and the steps; on a CPU
    the ranks share its cores, so their steps add up."""
    steps = MAX_STEPS[str(ctx.profile)] or 60_000 // case.batch_size
    ranks_sharing = case.world_size if ctx.device.type == "cpu" else 1
    return Work(
        flops=steps * case.batch_size * CNN_TRAIN_FLOPS * ranks_sharing,
        efficiency=CNN_EFFICIENCY,
        launches=steps * CNN_STEP_LAUNCHES,
        processes=2 if case.parallel == "ddp" else 0,
        calls=1,
    )


WORKLOAD = Workload(SPEC, cases, set_up, headline, work)
