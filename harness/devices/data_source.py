"""The session's training data, loaded once and shared by every training case."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterator

import torch

from gpubench.harness.devices.datasets import (
    ImageDataset,
    Split,
    load_split,
    normalize_all,
    resolve_dataset,
)

Batch = tuple[torch.Tensor, torch.Tensor]


@dataclass
class DataSource:
    """Which dataset, where, and where profiler tables go; splits are read once, device copies
    cached per device."""

    requested: str
    root: Path
    profile_ops: bool = False
    ops_sink: Callable[[str, list[dict[str, Any]]], str] | None = None
    # (train, test) images, for the smoke profile
    limit: tuple[int, int] | None = None
    _resolved: str | None = None
    _splits: dict[bool, Split] = field(default_factory=dict)
    _on_device: dict[tuple[bool, str], tuple[torch.Tensor, torch.Tensor]] = field(
        default_factory=dict
    )

    @property
    def dataset(self) -> str:
        if self._resolved is None:
            self._resolved = resolve_dataset(self.requested, self.root)
        return self._resolved

    def split(self, train: bool) -> Split:
        if train not in self._splits:
            self._splits[train] = self.read_split(train)
        return self._splits[train]

    def read_split(self, train: bool) -> Split:
        """The split read afresh, cached nowhere: for a run whose clock includes the data's first
        touch."""
        split = load_split(self.dataset, self.root, train)
        if self.limit is not None:
            count = self.limit[0 if train else 1]
            split = Split(split.images[:count], split.labels[:count])
        return split

    def subset(self, train: int, test: int) -> DataSource:
        """The first `train`/`test` images of each split; the full splits stay cached here."""
        splits = {
            kind: Split(split.images[:count], split.labels[:count])
            for kind, count in ((True, train), (False, test))
            for split in [self.split(kind)]
        }
        return DataSource(
            self.requested,
            self.root,
            self.profile_ops,
            self.ops_sink,
            limit=(train, test),
            _resolved=self.dataset,
            _splits=splits,
        )

    def image_dataset(self, train: bool) -> ImageDataset:
        return ImageDataset(self.split(train))

    def preloaded(self, train: bool, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """The whole split normalized once into one tensor on the device."""
        key = (train, str(device))
        if key not in self._on_device:
            split = self.split(train)
            self._on_device[key] = (normalize_all(split.images).to(device), split.labels.to(device))
        return self._on_device[key]

    def release(self) -> None:
        self._on_device.clear()


# hashable by identity, as a DataLoader
@dataclass(eq=False)
class PreloadedLoader:
    """Re-iterable, like a DataLoader: batches indexed from device-resident tensors (no per-image
    Python, no workers, no per-step host copies)."""

    images: torch.Tensor
    labels: torch.Tensor
    batch_size: int
    shuffle: bool

    def __iter__(self) -> Iterator[Batch]:
        count = self.labels.shape[0]
        order = torch.randperm(count, device=self.labels.device) if self.shuffle else None
        for begin in range(0, count, self.batch_size):
            batch = slice(begin, begin + self.batch_size)
            index = order[batch] if order is not None else batch
            yield self.images[index], self.labels[index]

    def __len__(self) -> int:
        return -(-self.labels.shape[0] // self.batch_size)
