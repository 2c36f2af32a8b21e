"""The benchmark's models: the MNIST CNN of the training epoch and the SimpleNet MLP of
inference."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class CNN(nn.Module):
    """Two conv blocks and two linear layers; `checkpointing` recomputes each conv block in backward
    (non-reentrant)."""

    def __init__(self, checkpointing: bool = False) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(64 * 7 * 7, 256),
            nn.ReLU(),
            nn.Dropout(0.5),
            nn.Linear(256, 10),
        )
        self.checkpointing = checkpointing
        # A plain tuple, not registered as submodules: the same layers, grouped per block.
        self._blocks = (self.features[0:3], self.features[3:6])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.checkpointing and self.training and torch.is_grad_enabled():
            for block in self._blocks:
                x = checkpoint(block, x, use_reentrant=False)
        else:
            x = self.features(x)
        return self.classifier(x)


class SimpleNet(nn.Module):
    """784→256→128→10 with ReLU; flattens [N, 1, 28, 28] images itself."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(),
            nn.Linear(784, 256),
            nn.ReLU(),
            nn.Linear(256, 128),
            nn.ReLU(),
            nn.Linear(128, 10),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


# Floating-point operations of one CNN forward per 28x28 image (multiply-adds x 2): conv1
# 28·28·32·9, conv2 14·14·64·32·9, fc1 3136·256, fc2 256·10. A training step is about three
# forwards.
CNN_FORWARD_FLOPS = 2 * (28 * 28 * 32 * 9 + 14 * 14 * 64 * 32 * 9 + 3136 * 256 + 256 * 10)
CNN_TRAIN_FLOPS = 3 * CNN_FORWARD_FLOPS
# The share of the probed matmul rate a small conv net's training reaches (2-core CPUs: 0.3-0.4).
CNN_EFFICIENCY = 0.35
# Kernels one training step launches (forward, backward, optimizer): what bounds a small batch on a
# GPU.
CNN_STEP_LAUNCHES = 60


MODELS = {"cnn": CNN, "mlp": SimpleNet}


def make_model(name: str, checkpointing: bool = False, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    if name == "cnn":
        return CNN(checkpointing=checkpointing)
    if checkpointing:
        raise ValueError("checkpointing is defined for the CNN's conv blocks only")
    return MODELS[name]()
