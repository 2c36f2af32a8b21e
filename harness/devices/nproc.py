"""How many processes the distributed cases may start (--nproc): checked before any case."""

from __future__ import annotations

import os

import psutil
import torch
from gpubench.harness.core.exits import UsageError

MAX_PROCS_PER_CORE = 4  # gloo ranks beyond this share the cores so thinly that the case measures the scheduler
RANK_HOST_BYTES = 1_500_000_000  # host memory one CPU rank needs: torch, the CNN, the preloaded dataset


def available_memory_bytes() -> int:
    return int(psutil.virtual_memory().available)


def default_nproc(device: torch.device) -> int:
    """The GPU count on cuda; 2 CPU ranks, or 1 where memory holds only one (check_nproc must accept the default)."""
    if device.type == "cuda":
        return torch.cuda.device_count()
    return 2 if 2 * RANK_HOST_BYTES <= available_memory_bytes() else 1


def check_cpu_nproc(nproc: int) -> None:
    """CPU ranks the machine cannot hold: too many per core, or more than its free memory."""
    cores = os.cpu_count() or 1
    if nproc > MAX_PROCS_PER_CORE * cores:
        raise UsageError(f"--nproc {nproc} is more than {MAX_PROCS_PER_CORE} processes per core on this "
                         f"{cores}-core machine — use --nproc {MAX_PROCS_PER_CORE * cores} or fewer")
    available = available_memory_bytes()
    if nproc > 1 and nproc * RANK_HOST_BYTES > available:
        fits = max(1, available // RANK_HOST_BYTES)
        raise UsageError(f"--nproc {nproc} needs about {nproc * RANK_HOST_BYTES / 1e9:.1f} GB "
                         f"({RANK_HOST_BYTES / 1e9:.1f} GB per process) "
                         f"but {available / 1e9:.1f} GB is available — use --nproc {fits} or fewer")


def check_nproc(nproc: int, device: torch.device) -> int:
    """Refuses before launch what the machine cannot hold: more ranks than GPUs on cuda, than cores or memory on cpu."""
    if nproc < 1:
        raise UsageError(f"--nproc {nproc}: use a positive number of processes")
    if device.type == "cpu":
        check_cpu_nproc(nproc)
    gpus = torch.cuda.device_count() if device.type == "cuda" else 0
    if device.type == "cuda" and nproc > gpus:
        raise UsageError(f"--nproc {nproc} needs {nproc} GPUs but this machine has {gpus} — "
                         f"use --nproc {gpus} or fewer")
    if device.type == "mps" and nproc > 1:
        raise UsageError("DDP on mps is not supported by PyTorch — use --device cpu for gloo processes")
    return nproc
