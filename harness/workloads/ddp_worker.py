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
import datetime
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from gpubench.harness.devices.data_source import DataSource
from gpubench.harness.devices.cpu_limits import usable_cores
from gpubench.harness.devices.device import memory_snapshot, reset_peak_memory
from gpubench.harness.records.safe_files import replace_bytes
from gpubench.harness.core.stats import summarize
from gpubench.harness.measurement.timing import SyncedClock
from gpubench.harness.workloads.common.models import make_model
from gpubench.harness.workloads.common.torchrun_launch import Heartbeat, exit_rank


@dataclass(frozen=True)
class RankReport:
    world_size: int
    backend: str
    batch_size: int  # per rank
    steps: int  # per rank
    train_s: float
    samples: int  # all ranks together
    step_samples_s: list[float]
    dataset: str
    peak_mem_bytes: int  # rank 0's peak: CUDA allocator, or the process's peak resident set on cpu

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.train_s


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=128, help="per-rank batch size")
    parser.add_argument("--max-steps", type=int, default=0,
                        help="stop after this many steps per rank (0: a full epoch)")
    parser.add_argument("--warmup-steps", type=int, default=3)
    parser.add_argument("--device-type", choices=("cpu", "cuda"),
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dataset", default="auto")
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--result-json", default=None, help="rank 0 writes its report here")
    parser.add_argument("--results-dir", default=None, help="rank 0 appends a results row here")
    parser.add_argument("--timeout-s", type=float, default=1800.0,
                        help="seconds a collective waits for the other ranks before this rank fails "
                        "(a dead or hung peer)")
    parser.add_argument("--heartbeat-dir", default=None,
                        help="each rank rewrites heartbeat-<rank>.json here every second, with its step")
    return parser.parse_args(argv)


def shard_loader(data: DataSource, batch_size: int, rank: int, world_size: int) -> DataLoader:
    images, labels = data.preloaded(True, torch.device("cpu"))
    sampler = DistributedSampler(TensorDataset(images, labels), num_replicas=world_size, rank=rank, shuffle=True,
                                 seed=0)
    return DataLoader(TensorDataset(images, labels), batch_size=batch_size, sampler=sampler,
                      pin_memory=torch.cuda.is_available())


def train(args: argparse.Namespace, rank: int, local_rank: int, world_size: int,
          beat: Heartbeat | None = None) -> RankReport:
    device = torch.device("cuda", local_rank) if args.device_type == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    # fp32 convolutions are IEEE fp32, as in the parent's cases (a fresh process starts True)
    torch.backends.cudnn.allow_tf32 = False
    clock = SyncedClock(device)
    model = make_model("cnn").to(device)
    reset_peak_memory(device)
    ddp = DistributedDataParallel(model, device_ids=[local_rank] if device.type == "cuda" else None)
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
    peak = memory_snapshot(device).peak_bytes
    return RankReport(world_size, dist.get_backend(), args.batch_size, steps, train_s, int(counts.item()),
                      step_samples_s, data.dataset, peak)


def write_row(report: RankReport, results_dir: Path, device: torch.device) -> Path:
    """Standalone use: rank 0 writes its own row through a Session (this node's fingerprint and sidecar)."""
    from gpubench.harness.measurement.runner import standalone_row
    from gpubench.harness.measurement.session import Session
    from gpubench.harness.records.results import check_writable, new_run_id
    from gpubench.harness.records.row import CaseResult, MeasuredColumns, Memory, Status
    from gpubench.harness.workloads.ddp import DistributedCase

    check_writable(results_dir)
    session = Session(device, results_dir, new_run_id(), "torchrun")
    session.open()
    stats = summarize(report.step_samples_s)
    case = DistributedCase("ddp", report.world_size, report.backend, report.batch_size)  # the suite's id scheme
    figures = {"dataset": report.dataset, "step_s": stats.median_s, "samples_per_s": report.samples_per_s,
               "samples_per_s_per_rank": report.samples_per_s / report.world_size}
    result = CaseResult(Status("ok", ""), MeasuredColumns(stats, 1, report.step_samples_s), figures=figures,
                        memory=Memory(report.peak_mem_bytes, None, None, None))
    session.record(standalone_row(session.base_row(), case, result))
    session.close()
    return session.csv_path


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rank, local_rank, world_size = (int(os.environ[name]) for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE"))
    if args.device_type == "cpu":
        torch.set_num_threads(max(1, usable_cores() // int(os.environ.get("LOCAL_WORLD_SIZE", world_size))))
    beat = Heartbeat(Path(args.heartbeat_dir), rank) if args.heartbeat_dir else None
    if beat is not None:
        beat.start()
    dist.init_process_group(backend="nccl" if args.device_type == "cuda" else "gloo",
                            timeout=datetime.timedelta(seconds=args.timeout_s))
    try:
        report = train(args, rank, local_rank, world_size, beat)
        if rank == 0:
            if args.result_json:
                result = Path(args.result_json)  # whole or absent, never written through a link planted there
                replace_bytes(result.parent, result.name, json.dumps(asdict(report)).encode("utf-8"),
                              "--result-json folder", "pass a real folder")
            if args.results_dir:
                device = torch.device("cuda", local_rank) if args.device_type == "cuda" else torch.device("cpu")
                print(f"rank 0: row -> {write_row(report, Path(args.results_dir), device)}")
        dist.barrier()  # tear down together: a rank leaving early can abort the others' gloo context
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    exit_rank(main)
