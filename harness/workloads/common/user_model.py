"""The model `--model module:factory --input SHAPE` names, loaded and checked before any case; each
problem is one UsageError line that names the fix."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from gpubench.harness.core.model_spec import ModelSpec
from gpubench.harness.core.exits import UsageError


def one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def factory_of(spec: ModelSpec) -> Callable[[], Any]:
    """The callable `module:factory` names; the current folder is importable, as for `python -m`."""
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    # a module that parses argv at import sees itself, not gpubench
    argv, sys.argv = sys.argv, [spec.module]
    try:
        found: Any = importlib.import_module(spec.module)
    except SystemExit as leaving:
        raise UsageError(
            f"--model {spec.target}: module {spec.module!r} called sys.exit({leaving.code!r}) as "
            "it "
            "was imported (a script that reads its command line?) — put that part under "
            '`if __name__ == "__main__":`'
        ) from None
    # whatever the import raised, the line says it
    except Exception as error:
        raise UsageError(
            f"--model {spec.target}: module {spec.module!r} cannot be imported ({one_line(error)}) "
            "— install it, or run from the folder that holds it (or add that folder to PYTHONPATH)"
        ) from None
    finally:
        sys.argv = argv
    for part in spec.factory.split("."):
        if not hasattr(found, part):
            raise UsageError(
                f"--model {spec.target}: {spec.module} has no attribute {spec.factory!r} — "
                "name a function or class there that returns the model"
            )
        found = getattr(found, part)
    if not callable(found):
        raise UsageError(
            f"--model {spec.target}: {spec.factory} is a {type(found).__name__}, not callable — "
            "name a function or class that returns the model"
        )
    return found


def make_model(spec: ModelSpec) -> nn.Module:
    """A fresh model from the factory. Its parameters must be float32, since the cases make fp32,
    bf16 and fp16 from them (a float64 default dtype gave rows labelled fp32); the default dtype and
    working folder are put back."""
    factory = factory_of(spec)
    default, folder = torch.get_default_dtype(), os.getcwd()
    try:
        model = factory()
    # the user's code: its error (or sys.exit), in one line
    except (Exception, SystemExit) as error:
        raise UsageError(
            f"--model {spec.target}: calling {spec.factory}() raised {one_line(error)} — "
            "name a factory that builds the model with no arguments"
        ) from None
    # a chdir in a factory sent rows to another folder than the lines named
    finally:
        changed, _ = torch.get_default_dtype(), torch.set_default_dtype(default)
        os.chdir(folder)
    if not isinstance(model, nn.Module):
        raise UsageError(
            f"--model {spec.target}: {spec.factory}() returned a {type(model).__name__}, "
            "not a torch.nn.Module — name a factory that returns the model"
        )
    odd = sorted(
        {
            str(p.dtype).removeprefix("torch.")
            for p in model.parameters()
            if p.is_floating_point() and p.dtype != torch.float32
        }
    )
    if odd:
        how = (
            f" (it set torch's default dtype to {str(changed).removeprefix('torch.')})"
            if changed != default
            else ""
        )
        raise UsageError(
            f"--model {spec.target}: {spec.factory}() made {', '.join(odd)} parameters{how}; the "
            "suite makes fp32, bf16 and fp16 itself from float32 ones — build the model in float32"
        )
    return model


def first_tensor(output: Any) -> torch.Tensor | None:
    """The tensor a loss is taken from: the output, or the first tensor of a tuple, list or dict (a
    ModelOutput)."""
    if isinstance(output, torch.Tensor):
        return output
    values = (
        output.values()
        if isinstance(output, dict)
        else output
        if isinstance(output, (tuple, list))
        else ()
    )
    return next((value for value in values if isinstance(value, torch.Tensor)), None)


def sample_batch(
    spec: ModelSpec, batch_size: int, device: torch.device | str = "cpu"
) -> torch.Tensor:
    """Float32 normal values of the --input shape, or int64 token ids below the vocabulary size
    (--input-ids)."""
    shape = (batch_size, *spec.input_shape)
    if spec.vocab_size is not None:
        return torch.randint(spec.vocab_size, shape, device=device)
    return torch.randn(shape, device=device)


# What torch says when floats reach an embedding or an index: the model takes integer ids.
WANTS_IDS = ("Long", "Int", "integer", "indices", "index")


def input_hint(spec: ModelSpec, error: Exception, model: nn.Module) -> str:
    """The fix a failed forward of the sample batch points at."""
    if spec.vocab_size is None and any(word in str(error) for word in WANTS_IDS):
        return (
            "the model takes integer ids, not float32 values: add --input-ids VOCAB (int64 token "
            "ids below the vocabulary size), such as --input-ids 50304"
        )
    rows = min(
        (module.num_embeddings for module in model.modules() if isinstance(module, nn.Embedding)),
        default=None,
    )
    if spec.vocab_size is not None and rows is not None and spec.vocab_size > rows:
        return (
            f"token ids reach {spec.vocab_size - 1} but the model's embedding has {rows} rows: use "
            f"--input-ids {rows}"
        )
    return "give the shape of one sample the model takes"


def check_model(spec: ModelSpec) -> None:
    """Before any case: the model's forward takes two samples on the CPU and returns a floating
    tensor."""
    model = make_model(spec).eval()
    try:
        with torch.inference_mode():
            output = model(sample_batch(spec, 2))
    # the user's model: its error, in one line
    except Exception as error:
        dtype = "int64" if spec.vocab_size is not None else "float32"
        raise UsageError(
            f"--input {spec.input_text}: the model's forward of a {dtype} batch of shape "
            f"{(2, *spec.input_shape)} raised {one_line(error)} — "
            f"{input_hint(spec, error, model)}"
        ) from None
    tensor = first_tensor(output)
    if tensor is None or not tensor.is_floating_point():
        raise UsageError(
            f"--model {spec.target}: the forward returned {type(output).__name__}, with no "
            "floating tensor to train on — return the output tensor (or a tuple or dict that "
            "starts with it)"
        )
