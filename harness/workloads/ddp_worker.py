"""One rank of the distributed training benchmark (DistributedDataParallel). Launched by torchrun:

    torchrun --nproc_per_node=2 -m gpubench.harness.workloads.ddp_worker --results-dir results

Each process trains the guide's CNN under DistributedDataParallel on its DistributedSampler shard
(backend nccl on CUDA, gloo on CPU). Rank 0 alone reports: to --result-json (how the pytest bench
reads it) or as a results row in --results-dir (standalone and multi-node use).

A collective that waits longer than --timeout-s for a peer (a dead or hung rank) fails the rank
instead of hanging it. With --heartbeat-dir, each rank's thread rewrites heartbeat-<rank>.json
there every second with its step: a rank whose file goes stale stopped responding (SIGSTOP, a
frozen process), and the launcher names it instead of the peer that timed out waiting for it.
"""

from __future__ import annotations

import argparse
from typing import Any
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from gpubench.harness.devices.data_source import DataSource
from gpubench.harness.devices.device import memory_snapshot, reset_peak_memory
from gpubench.harness.core.stats import summarize
from gpubench.harness.measurement.timing import SyncedClock
from gpubench.harness.workloads.common.models import make_model
from gpubench.harness.workloads.common.torchrun_launch import (
    Heartbeat,
    exit_rank,
    rank_arguments,
    report_rank0,
    run_rank,
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = rank_arguments(
        argparse.ArgumentParser(
            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
        )
    )
    parser.add_argument("--batch-size", type=int, default=128, help="per-rank batch size")
    parser.add_argument(
        "--max-steps",
        type=int,
        default=0,
        help="stop after this many steps per rank (0: a full epoch)",
    )
    parser.add_argument("--warmup-steps", type=int, default=3)
    parser.add_argument("--dataset", default="auto")
    parser.add_argument("--data-root", default=None)
    return parser.parse_args(argv)


def shard_loader(data: DataSource, batch_size: int, rank: int, world_size: int) -> DataLoader:
    images, labels = data.preloaded(True, torch.device("cpu"))
    sampler = DistributedSampler(
        TensorDataset(images, labels), num_replicas=world_size, rank=rank, shuffle=True, seed=0
    )
    return DataLoader(
        TensorDataset(images, labels),
        batch_size=batch_size,
        sampler=sampler,
        pin_memory=torch.cuda.is_available(),
    )


def train(
    args: argparse.Namespace,
    rank: int,
    device: torch.device,
    world_size: int,
    beat: Heartbeat | None = None,
) -> dict[str, Any]:
    """The rank's report: its batch and steps, the samples of all ranks together, and its peak
    memory (CUDA allocator, or the process's peak resident set on cpu)."""
    # fp32 convolutions are IEEE fp32, as in the parent's cases (a fresh process starts True)
    torch.backends.cudnn.allow_tf32 = False
    clock = SyncedClock(device)
    model = make_model("cnn").to(device)
    reset_peak_memory(device)
    ddp = DistributedDataParallel(
        model, device_ids=[device.index] if device.type == "cuda" else None
    )
    optimizer = torch.optim.Adam(ddp.parameters(), lr=1e-3)
    criterion = torch.nn.CrossEntropyLoss()
    from gpubench.harness.devices.datasets import default_data_root

    data = DataSource(args.dataset, Path(args.data_root) if args.data_root else default_data_root())
    loader = shard_loader(data, args.batch_size, rank, world_size)

    def step(x: torch.Tensor, y: torch.Tensor) -> None:
        optimizer.zero_grad(set_to_none=True)
        criterion(ddp(x.to(device, non_blocking=True)), y.to(device, non_blocking=True)).backward()
        optimizer.step()

    warm = iter(loader)
    for _ in range(args.warmup_steps):
        step(*next(warm))
    loader.sampler.set_epoch(1)
    step_samples_s: list[float] = []
    seen = steps = 0
    dist.barrier()
    start = previous = clock()
    for x, y in loader:
        step(x, y)
        seen += x.shape[0]
        steps += 1
        if beat is not None:
            beat.step = steps
        now = clock()
        step_samples_s.append(now - previous)
        previous = now
        if args.max_steps and steps >= args.max_steps:
            break
    dist.barrier()
    train_s = clock() - start
    counts = torch.tensor([seen], dtype=torch.long, device=device)
    dist.all_reduce(counts)
    return {
        "world_size": world_size,
        "backend": dist.get_backend(),
        "batch_size": args.batch_size,
        "steps": steps,
        "train_s": train_s,
        "samples": int(counts.item()),
        "step_samples_s": step_samples_s,
        "dataset": data.dataset,
        "peak_mem_bytes": memory_snapshot(device).peak_bytes,
    }


def rows(report: dict[str, Any]) -> list[tuple[Any, Any]]:
    """Standalone use: rank 0's row, with the suite's case id."""
    from gpubench.harness.records.row import CaseResult, MeasuredColumns, Memory, Status
    from gpubench.harness.workloads.ddp import DistributedCase

    stats, samples_per_s = (
        summarize(report["step_samples_s"]),
        report["samples"] / report["train_s"],
    )
    figures = {
        "dataset": report["dataset"],
        "step_s": stats.median_s,
        "samples_per_s": samples_per_s,
        "samples_per_s_per_rank": samples_per_s / report["world_size"],
    }
    result = CaseResult(
        Status("ok", ""),
        MeasuredColumns(stats, 1, report["step_samples_s"]),
        figures=figures,
        memory=Memory(report["peak_mem_bytes"], None, None, None),
    )
    case = DistributedCase("ddp", report["world_size"], report["backend"], report["batch_size"])
    return [(case, result)]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def work(rank: int, device: torch.device, world_size: int, beat: Heartbeat | None) -> None:
        report = train(args, rank, device, world_size, beat)
        if rank == 0:
            report_rank0(args, report, device, lambda: rows(report))

    return run_rank(args, work)


if __name__ == "__main__":
    exit_rank(main)
