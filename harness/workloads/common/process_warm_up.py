"""The warm-up a build process gets once, before its first case: what a case later in the build finds already done by
the cases before it (DataLoader workers forked and fed, the device's libraries loaded, pinned host memory cached), so
that a figure does not depend on where the plan put its case. Nothing here is timed or recorded."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, TensorDataset

from gpubench.harness.devices.device import synchronize

_warmed: set[str] = set()  # the devices this process has warmed (a fork server runs no case: its children start empty)
WARM_WORKERS = 2  # DataLoader workers started once: their first fork and imports are a process's, not a case's
WARM_IMAGES = 64


def warm_once(device: torch.device) -> None:
    """`warm_process` the first time this process times a case on `device`."""
    if str(device) not in _warmed:
        warm_process(device)
        _warmed.add(str(device))


def warm_process(device: torch.device) -> None:
    """A CNN step forward and back, a matmul, and a worker-fed DataLoader (pinned on CUDA), on `device`."""
    images = torch.randn(WARM_IMAGES, 1, 28, 28)
    labels = torch.zeros(WARM_IMAGES, dtype=torch.long)
    loader = DataLoader(TensorDataset(images, labels), batch_size=WARM_IMAGES // WARM_WORKERS,
                        num_workers=WARM_WORKERS, pin_memory=device.type == "cuda")
    conv = torch.nn.Conv2d(1, 8, 3).to(device)
    for batch, _ in loader:
        batch = batch.to(device, non_blocking=True)
        conv(batch).sum().backward()
    square = torch.randn(256, 256, device=device)
    square @ square
    synchronize(device)
