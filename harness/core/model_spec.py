"""`gpubench run --model module:factory --input 3x64x64`: the model a run benchmarks, as text checked
before any import (torch-free). Importing the module and calling the factory is
gpubench.harness.workloads.user_model's; timing it is gpubench.harness.workloads.model's."""

from __future__ import annotations

import re
from dataclasses import dataclass

DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
TARGET = re.compile(rf"(?P<module>{DOTTED}):(?P<factory>{DOTTED})", re.ASCII)
SHAPE = re.compile(r"[1-9][0-9]{0,6}(x[1-9][0-9]{0,6}){0,5}", re.ASCII)  # 1 to 6 sizes, each up to 10^7
MAX_SAMPLE_ELEMENTS = 2**28  # one sample of 1 GiB in fp32: a larger --input is a typo, not a model


class ModelSpecError(ValueError):
    """A --model or --input the run cannot use: the message names the fix."""


@dataclass(frozen=True)
class ModelSpec:
    """The factory to call (`module:factory`, the factory may be a dotted attribute) and the shape of one
    sample it takes (the batch size is added in front by each case)."""

    module: str
    factory: str
    input_shape: tuple[int, ...]

    @property
    def target(self) -> str:
        return f"{self.module}:{self.factory}"

    @property
    def input_text(self) -> str:
        return "x".join(map(str, self.input_shape))


def parse_input_shape(text: str) -> tuple[int, ...]:
    if not SHAPE.fullmatch(text.strip().lower()):
        raise ModelSpecError(f"--input {text!r}: give one sample's shape as sizes joined by 'x', without the batch size, "
                             "such as --input 3x64x64")
    shape = tuple(int(size) for size in text.strip().lower().split("x"))
    elements = 1
    for size in shape:
        elements *= size
    if elements > MAX_SAMPLE_ELEMENTS:
        raise ModelSpecError(f"--input {text}: {elements:,} elements in one sample is above {MAX_SAMPLE_ELEMENTS:,} — "
                             "give the shape of one sample, such as --input 3x224x224")
    return shape


def parse_model_options(model: str | None, input_shape: str | None) -> ModelSpec | None:
    """The run's model, None without --model; --model and --input go together."""
    if model is None:
        if input_shape is not None:
            raise ModelSpecError(f"--input {input_shape} without --model: also pass the model, such as "
                                 "--model torchvision.models:resnet18")
        return None
    found = TARGET.fullmatch(model.strip())
    if found is None:
        raise ModelSpecError(f"--model {model!r}: name a factory as module:function, such as "
                             "--model torchvision.models:resnet18")
    if input_shape is None:
        raise ModelSpecError(f"--model {model} needs --input: the shape of one sample, such as --input 3x64x64")
    return ModelSpec(found["module"], found["factory"], parse_input_shape(input_shape))
