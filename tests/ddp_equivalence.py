"""Runs inside spawned gloo processes for test_ddp (a module, so spawn can import it)."""

from __future__ import annotations

import os
import socket

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from gpubench.harness.workloads.common.models import make_model

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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rank_main(rank: int, world_size: int, port: int, out_file: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size
    )
    try:
        model = DistributedDataParallel(make_model("mlp", seed=0))
        x, y = fixed_batch()
        shard = slice(rank * len(y) // world_size, (rank + 1) * len(y) // world_size)
        # DDP averages the ranks' gradients = the combined batch's mean
        train(model, x[shard], y[shard])
        if rank == 0:
            torch.save([p.detach() for p in model.module.parameters()], out_file)
        # no rank tears the group down while another still uses it
        dist.barrier()
    finally:
        dist.destroy_process_group()
    # Gloo's worker threads can abort the interpreter's finalization (SIGABRT, "terminate called
    # without an active exception"; seen here about 1 run in 10 with torch 2.14): leave without it.
    os._exit(0)
