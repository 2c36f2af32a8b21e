"""Factories for `--model` tests: a tiny CNN (an image input), a tiny MLP (a flat input), and
factories that break the way a user's can."""

from __future__ import annotations

import os
import sys
import time

import torch
from torch import nn


def tiny_cnn() -> nn.Module:
    """3x8x8 images -> 4 classes; batch norm, so train and eval differ as in a real model."""
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4, 4),
    )


def tiny_mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 2))


def float64_mlp() -> nn.Module:
    """A factory that changes torch's process-wide default dtype, as some research code does."""
    torch.set_default_dtype(torch.float64)
    return nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 2))


def wanders() -> nn.Module:
    """A factory that changes the working folder (to where its data lives, say)."""
    import os
    import tempfile

    os.chdir(tempfile.gettempdir())
    return tiny_mlp()


class TupleOutput(nn.Module):
    """Returns (logits, extras), as many models do."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 2)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, int]]:
        return self.fc(x), {"aux": 1}


class NaNModel(nn.Module):
    """A model whose output is NaN: its training loss is not finite."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) * float("nan")


class Parameterless(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def raises() -> nn.Module:
    raise RuntimeError("weights file missing")


def not_a_module() -> object:
    return {"model": 1}


NOT_CALLABLE = 42


class TinyLM(nn.Module):
    """A language model as nanoGPT's GPT is one: int64 token ids in, (logits, loss=None) out."""

    def __init__(self, vocab: int = 64, width: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.head = nn.Linear(width, vocab)

    def forward(
        self, ids: torch.Tensor, targets: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, None]:
        return self.head(self.embed(ids)), None


def tiny_lm() -> nn.Module:
    return TinyLM()


def exits() -> nn.Module:
    sys.exit(3)


def leaves() -> nn.Module:
    # a run that ends from inside: no exception, no word
    os._exit(0)


def never_returns() -> nn.Module:
    while True:
        time.sleep(0.01)
