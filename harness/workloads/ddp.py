"""Multi-device training (guide §6): DDP under torchrun against one process, and DataParallel."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import torch

from harness.cases import Case, CaseSkipped
from harness.runner import BuildContext, Timed
from harness.stats import SampleStats, median
from harness.timing import RoundPlan
from harness.workloads.data_source import DataSource, PreloadedLoader
from harness.workloads.models import make_model
from harness.workloads.train_loop import Trainer

# Per-rank steps per profile (0 = the full epoch of the rank's shard).
MAX_STEPS = {"smoke": 5, "quick": 60, "full": 0}
PER_RANK_BATCH = 128
MAX_EFFICIENCY = 1.05  # above this, N processes beat N x one process: the measurement is wrong
LAUNCH_TIMEOUT_S = 1800
BUILDS = {"smoke": 1, "quick": 1, "full": 1}  # a launch is seconds of process start; steps give the spread


class NprocError(ValueError):
    pass


@dataclass(frozen=True)
class DistributedCase(Case):
    workload: ClassVar[str] = "ddp"
    parallel: str  # ddp | dataparallel
    world_size: int
    backend: str
    batch_size: int  # per rank (ddp) or per GPU share of the global batch (dataparallel)


def default_nproc(device: torch.device) -> int:
    return torch.cuda.device_count() if device.type == "cuda" else 2


def check_nproc(nproc: int, device: torch.device) -> int:
    """More processes than GPUs cannot each own a device: refuse before launch."""
    if nproc < 1:
        raise NprocError(f"--nproc {nproc}: use a positive number of processes")
    if device.type == "cuda" and nproc > torch.cuda.device_count():
        raise NprocError(f"--nproc {nproc} needs {nproc} GPUs but this machine has {torch.cuda.device_count()} — use --nproc {torch.cuda.device_count()} or fewer")
    if device.type == "mps" and nproc > 1:
        raise NprocError("DDP on mps is not supported by PyTorch — use --device cpu for gloo processes")
    return nproc


def cases(ctx: BuildContext) -> list[DistributedCase]:
    nproc, device = ctx.nproc, ctx.device
    backend = "nccl" if device.type == "cuda" else "gloo"
    ddp = [DistributedCase("ddp", n, backend, PER_RANK_BATCH) for n in sorted({1, nproc})]
    dataparallel = [DistributedCase("dataparallel", max(nproc, 2), "single-process", PER_RANK_BATCH)]
    return ddp + dataparallel


def torchrun_command(case: DistributedCase, device: torch.device, data: DataSource, max_steps: int, result_json: Path) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={case.world_size}",
            "-m", "harness.workloads.ddp_worker", f"--batch-size={case.batch_size}", f"--max-steps={max_steps}",
            f"--device-type={'cuda' if device.type == 'cuda' else 'cpu'}", f"--dataset={data.dataset}",
            f"--data-root={data.root}", f"--result-json={result_json}"]


def launch(command: list[str], result_json: Path) -> dict[str, Any]:
    """Run torchrun and read rank 0's report; a failing rank fails the case with its last error line."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH")])))
    done = subprocess.run(command, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT_S, env=env)
    if done.returncode != 0 or not result_json.exists():
        raise RuntimeError(f"torchrun exited {done.returncode}: {rank_error(done.stderr + done.stdout)}")
    return json.loads(result_json.read_text())


_EXCEPTION_LINE = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception)\b.*?: .+|^\S+: error: .+")


def rank_error(output: str) -> str:
    """The first exception a rank printed (the root cause), not torchrun's own ChildFailedError."""
    for line in output.splitlines():
        line = line.strip()
        if _EXCEPTION_LINE.match(line) and "ChildFailedError" not in line:
            return line
    return "no error line in the ranks' output"


def single_process_samples_per_s(case: DistributedCase, rows: list[dict[str, Any]]) -> float | None:
    """The one-process baseline for `case` from the rows already written in this run."""
    same = [r["samples_per_s"] for r in rows
            if r.get("workload") == "ddp" and r.get("status") == "ok" and r.get("parallel") == "ddp" and r.get("world_size") == 1
            and r.get("backend") == case.backend and r.get("batch_size") == case.batch_size and r.get("samples_per_s")]
    return median(same) if same else None


def ddp_build(case: DistributedCase, ctx: BuildContext) -> Timed:
    device, data = ctx.device, ctx.data
    workdir = Path(tempfile.mkdtemp(prefix="gpubench-ddp-"))
    max_steps = MAX_STEPS[ctx.profile]
    command = torchrun_command(case, device, data, max_steps, workdir / "rank0.json")

    def baseline() -> tuple[float | None, str]:
        """Samples/s of one process: from this run's rows, else measured now (whatever -k selects)."""
        if case.world_size == 1:
            return None, ""
        found = single_process_samples_per_s(case, ctx.run_rows)
        if found:
            return found, "scaling baseline: this run's world_size=1 row"
        single = replace(case, world_size=1)
        report = launch(torchrun_command(single, device, data, max_steps, workdir / "single.json"), workdir / "single.json")
        return report["samples"] / report["train_s"], "scaling baseline: one process measured for this case (no world_size=1 row in this run)"

    def figures(stats: SampleStats, report: dict[str, Any]) -> dict[str, Any]:
        samples_per_s = report["samples"] / report["train_s"]
        single, source = (samples_per_s, "") if case.world_size == 1 else baseline()
        efficiency = samples_per_s / (case.world_size * single) if single else None
        notes = ["samples are rank 0's step times; peak memory is rank 0's", source]
        if efficiency is not None and efficiency > MAX_EFFICIENCY:
            notes.append(f"impossible: scaling efficiency {efficiency:.2f} > {MAX_EFFICIENCY} — another job shared the machine during one of the runs")
        return {"dataset": report["dataset"], "samples_per_s": samples_per_s, "samples_per_s_per_rank": samples_per_s / case.world_size,
                "step_s": stats.median_s, "scaling_efficiency": efficiency,
                "effective_batch": case.batch_size * case.world_size, "peak_mem_bytes": report["peak_mem_bytes"],
                "reason": "; ".join(filter(None, notes))}

    return Timed(fn=lambda: launch(command, workdir / "rank0.json"), figures=figures, plan=RoundPlan(0, 1, 1, 0.0),
                 windows=lambda report: report["step_samples_s"], cleanup=lambda: shutil.rmtree(workdir, ignore_errors=True))


def dataparallel_build(case: DistributedCase, ctx: BuildContext) -> Timed:
    device, profile, data = ctx.device, ctx.profile, ctx.data
    if device.type != "cuda" or torch.cuda.device_count() < 2:
        have = torch.cuda.device_count() if torch.cuda.is_available() else 0
        raise CaseSkipped(f"DataParallel needs two or more GPUs (this machine has {have})")
    global_batch = case.batch_size * case.world_size
    model = torch.nn.DataParallel(make_model("cnn"), device_ids=list(range(case.world_size)))
    trainer = Trainer(model, device)
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
        return {"dataset": data.dataset, "samples_per_s": samples_per_s, "samples_per_s_per_rank": samples_per_s / case.world_size,
                "step_s": stats.median_s / steps, "effective_batch": global_batch}

    first = next(iter(loader))
    return Timed(fn=run, figures=figures, plan=RoundPlan(1, 1, 1, 0.0), warmup=lambda: trainer.step([first]))


def build(case: DistributedCase, ctx: BuildContext) -> Timed:
    return (dataparallel_build if case.parallel == "dataparallel" else ddp_build)(case, ctx)
