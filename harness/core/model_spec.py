"""`gpubench run --model module:factory --input 3x64x64`: the model a run benchmarks, checked as
text before any import (torch-free); workloads.common.user_model imports and calls it."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from gpubench.harness.core.exits import UsageError

# any dotted run of characters but the separators; each part is then checked as Python names it
# (str.isidentifier: a module named `módulo` is one), so no pattern of ASCII letters decides what a
# name may be
DOTTED = r"[^.:\s]+(\.[^.:\s]+)*"
TARGET = re.compile(rf"(?P<module>{DOTTED}):(?P<factory>{DOTTED})")
# 1 to 6 sizes, each up to 10^7
SHAPE = re.compile(r"[1-9][0-9]{0,6}(x[1-9][0-9]{0,6}){0,5}", re.ASCII)
# one sample of 1 GiB in fp32: a larger --input is a typo, not a model
MAX_SAMPLE_ELEMENTS = 2**28


@dataclass(frozen=True)
class ModelSpec:
    """The factory (`module:factory`, dotted attributes allowed) and one sample's shape (each case
    adds the batch)."""

    module: str
    factory: str
    input_shape: tuple[int, ...]
    # the sample is int64 token ids below it (--input-ids); None: float32 values
    vocab_size: int | None = None

    @property
    def target(self) -> str:
        return f"{self.module}:{self.factory}"

    @property
    def input_text(self) -> str:
        """The sample as rows name it: `3x64x64`, or `256 ids<50304` for token ids."""
        shape = "x".join(map(str, self.input_shape))
        return shape if self.vocab_size is None else f"{shape} ids<{self.vocab_size}"


def parse_input_shape(text: str) -> tuple[int, ...]:
    if not SHAPE.fullmatch(text.strip().lower()):
        raise UsageError(
            f"--input {text!r}: give one sample's shape as sizes joined by 'x', "
            "without the batch size, such as --input 3x64x64"
        )
    shape = tuple(int(size) for size in text.strip().lower().split("x"))
    elements = math.prod(shape)
    if elements > MAX_SAMPLE_ELEMENTS:
        raise UsageError(
            f"--input {text}: {elements:,} elements in one sample is above {MAX_SAMPLE_ELEMENTS:,} "
            "— give the shape of one sample, such as --input 3x224x224"
        )
    return shape


MAX_VOCAB = 2**31 - 1


def parse_vocab(text: str) -> int:
    cleaned = text.strip().replace("_", "")
    if not cleaned.isascii() or not cleaned.isdigit() or not 2 <= int(cleaned) <= MAX_VOCAB:
        raise UsageError(
            f"--input-ids {text!r}: give the vocabulary size, a whole number from 2 up "
            "(the ids drawn are below it), such as --input-ids 50304"
        )
    return int(cleaned)


def _python_names(*dotted: str) -> bool:
    """Whether each dotted text is names Python could import and look up (`str.isidentifier`, any
    script)."""
    return all(part.isidentifier() for text in dotted for part in text.split("."))


def parse_model_options(
    model: str | None, input_shape: str | None, input_ids: str | None = None
) -> ModelSpec | None:
    """The run's model, None without --model; --model and --input go together, --input-ids with
    them."""
    if input_ids is not None and (model is None or input_shape is None):
        raise UsageError(
            f"--input-ids {input_ids} needs --model and --input: the model and the number of ids "
            "in one sample, such as --model nanogpt:gpt --input 256 --input-ids 50304"
        )
    if model is None:
        if input_shape is not None:
            raise UsageError(
                f"--input {input_shape} without --model: also pass the model, such as "
                "--model torchvision.models:resnet18"
            )
        return None
    found = TARGET.fullmatch(model.strip())
    if found is None or not _python_names(found["module"], found["factory"]):
        raise UsageError(
            f"--model {model!r}: name a factory as module:function, such as "
            "--model torchvision.models:resnet18"
        )
    if input_shape is None:
        raise UsageError(
            f"--model {model} needs --input: the shape of one sample, such as --input 3x64x64"
        )
    vocab = parse_vocab(input_ids) if input_ids is not None else None
    return ModelSpec(found["module"], found["factory"], parse_input_shape(input_shape), vocab)
