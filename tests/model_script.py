"""A training script imported as a --model module: it reads its command line as it is imported."""

import argparse

import torch

PARSER = argparse.ArgumentParser()
PARSER.add_argument("--lr", type=float, required=True)
# without its --lr: exit 2, as the script would
ARGS = PARSER.parse_args()


def make() -> torch.nn.Module:
    return torch.nn.Linear(4, 2)
