"""Runs inside spawned gloo processes for test_ddp (a module, so spawn can import it)."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from harness.workloads.models import make_model

STEPS = 3


def fixed_batch(n: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(42)
    return torch.randn(n, 1, 28, 28, generator=gen), torch.randint(0, 10, (n,), generator=gen)


def train(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> None:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(STEPS):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()


def single_process_params() -> list[torch.Tensor]:
    model = make_model("mlp", seed=0)
    train(model, *fixed_batch())
    return [p.detach() for p in model.parameters()]


def rank_main(rank: int, world_size: int, init_file: str, out_file: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size)
    try:
        model = DistributedDataParallel(make_model("mlp", seed=0))
        x, y = fixed_batch()
        shard = slice(rank * len(y) // world_size, (rank + 1) * len(y) // world_size)
        train(model, x[shard], y[shard])  # DDP averages the ranks' gradients = the combined batch's mean
        if rank == 0:
            torch.save([p.detach() for p in model.module.parameters()], out_file)
    finally:
        dist.destroy_process_group()
