"""The warm-up a build process gets before its cases: what a case later in the build finds already
done by the cases before it (the device's libraries loaded and a conv step's kernels picked;
DataLoader workers forked and fed, pinned host memory cached on CUDA), so that a figure does not
depend on where the plan put its case. Nothing here is timed or recorded."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, TensorDataset

from gpubench.harness.devices.device import synchronize

# what this process has warmed (a fork server runs no case: its children start empty)
_warmed: set[str] = set()
# DataLoader workers started once: their first fork and imports are a process's, not a case's
WARM_WORKERS = 2
WARM_IMAGES = 64


def warm_once(device: torch.device, workers: bool) -> None:
    """The device before this process's first case on it; DataLoader workers before its first case
    that has them."""
    if str(device) not in _warmed:
        warm_device(device)
        _warmed.add(str(device))
    if workers and f"{device} workers" not in _warmed:
        warm_workers(device)
        _warmed.add(f"{device} workers")


def warm_device(device: torch.device) -> None:
    """A conv step forward and back and a matmul on `device`."""
    conv = torch.nn.Conv2d(1, 8, 3).to(device)
    conv(torch.randn(8, 1, 28, 28, device=device)).sum().backward()
    square = torch.randn(256, 256, device=device)
    square @ square
    synchronize(device)


def warm_workers(device: torch.device) -> None:
    """A small dataset through DataLoader workers to `device` (pinned on CUDA, as the epochs'
    loaders do)."""
    images, labels = torch.randn(WARM_IMAGES, 1, 28, 28), torch.zeros(WARM_IMAGES, dtype=torch.long)
    loader = DataLoader(
        TensorDataset(images, labels),
        batch_size=WARM_IMAGES // WARM_WORKERS,
        num_workers=WARM_WORKERS,
        pin_memory=device.type == "cuda",
    )
    for batch, _ in loader:
        batch.to(device, non_blocking=True)
    synchronize(device)
