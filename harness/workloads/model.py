"""The user's own model (`--model module:factory --input SHAPE`): its training step (MSE to a fixed
random target, so any output fits) and inference, one setting at a time around fp32 eager; a
non-finite loss or output fails the row, read once after the rounds."""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from gpubench.harness.catalog.model import SPEC
from gpubench.harness.core.model_spec import ModelSpec
from gpubench.harness.core.stats import SampleStats
from gpubench.harness.measurement.cases import Case, CaseSkipped, Diverged
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.measurement.measure import Timed
from gpubench.harness.measurement.workload import Workload
from gpubench.harness.workloads.common.train_loop import (
    apply_step,
    autocast,
    compile_skip_reason,
    precision_skip_reason,
)
from gpubench.harness.workloads.common.matmuls import with_precision
from gpubench.harness.workloads.common.user_model import first_tensor, make_model, sample_batch

# Batch sizes per profile: the first is the base every other setting is swept at.
BATCH_SIZES = {
    "cpu": {"smoke": (2,), "quick": (8, 32), "full": (8, 32, 128)},
    "gpu": {"smoke": (8,), "quick": (32, 128), "full": (32, 128, 512)},
}
# A cold torch.compile of a real model takes minutes on a CPU: smoke leaves it out everywhere.
COMPILE_MODES = {
    "smoke": (),
    "quick": ("default",),
    "full": ("default", "reduce-overhead", "max-autotune"),
}
# small: the step must stay finite on any model, it is timed, not trained to an accuracy
LR = 1e-4


@dataclass(frozen=True)
class ModelCase(Case):
    workload: ClassVar[str] = "model"
    # module:factory
    model: str
    # one sample's shape, 3x64x64
    input_shape: str
    # train or inference
    step: str
    # fp32, bf16 (autocast), fp16 (autocast; GradScaler when training)
    precision: str
    compile_mode: str
    # None: the input is not an image (C x H x W)
    channels_last: bool | None
    # None: inference has no backward
    checkpointing: bool | None
    batch_size: int


def sweep(
    base: ModelCase, batch_sizes: tuple[int, ...], compile_modes: tuple[str, ...]
) -> list[ModelCase]:
    cases = [replace(base, batch_size=size) for size in batch_sizes]
    cases += [replace(base, precision=precision) for precision in ("bf16", "fp16")]
    cases += [replace(base, compile_mode=mode) for mode in compile_modes]
    cases += [replace(base, channels_last=True)] if base.channels_last is not None else []
    return cases + ([replace(base, checkpointing=True)] if base.checkpointing is not None else [])


def cases(ctx: BuildContext) -> list[ModelCase]:
    """No case without --model; else the training step's sweep, then inference's."""
    spec = ctx.model
    if spec is None:
        return []
    profile = str(ctx.profile)
    batch_sizes = BATCH_SIZES["cpu" if ctx.device.type == "cpu" else "gpu"][profile]
    modes = COMPILE_MODES[profile][:1] if ctx.device.type != "cuda" else COMPILE_MODES[profile]
    # image: C x H x W
    channels_last = False if len(spec.input_shape) == 3 and spec.vocab_size is None else None
    train = ModelCase(
        spec.target, spec.input_text, "train", "fp32", "none", channels_last, False, batch_sizes[0]
    )
    inference = replace(train, step="inference", checkpointing=None)
    return sweep(train, batch_sizes, modes) + sweep(inference, batch_sizes, modes)


def enable_checkpointing(model: nn.Module) -> str | None:
    """The model's own switch (Hugging Face's `gradient_checkpointing_enable`), else each direct
    child with trainable parameters recomputed in backward (non-reentrant); the skip reason when
    neither applies."""
    if getattr(model, "supports_gradient_checkpointing", False) and hasattr(
        model, "gradient_checkpointing_enable"
    ):
        model.gradient_checkpointing_enable()
        return None
    children = [
        child for child in model.children() if any(p.requires_grad for p in child.parameters())
    ]
    if not children:
        return (
            "gradient checkpointing needs submodules with parameters to recompute: this model has "
            "none"
        )
    # the child's own call, hooks included, stays; only its forward is recomputed
    for child in children:
        child.forward = functools.partial(checkpoint, child.forward, use_reentrant=False)  # type: ignore[method-assign]
    return None


class Step:
    """One timed call of the case on a fixed batch, the model moved and compiled as the case
    says."""

    def __init__(
        self, case: ModelCase, model: nn.Module, spec: ModelSpec, device: torch.device
    ) -> None:
        self.memory_format = torch.channels_last if case.channels_last else torch.contiguous_format
        self.model = model.to(device, memory_format=self.memory_format)
        self.forward: Any = (
            self.model
            if case.compile_mode == "none"
            else torch.compile(self.model, mode=case.compile_mode)
        )
        self.batch = sample_batch(spec, case.batch_size, device).contiguous(
            memory_format=self.memory_format
        )
        self.device = device
        self.autocast = functools.partial(autocast, device, case.precision)
        self.n_params = sum(p.numel() for p in self.model.parameters())


class ModelTrainStep(Step):
    def __init__(
        self, case: ModelCase, model: nn.Module, spec: ModelSpec, device: torch.device
    ) -> None:
        super().__init__(case, model, spec, device)
        self.model.train()
        params = [p for p in self.model.parameters() if p.requires_grad]
        if not params:
            raise CaseSkipped(
                "the model has no trainable parameters: there is no training step to time"
            )
        self.optimizer = torch.optim.AdamW(params, lr=LR)
        self.scaler = torch.amp.GradScaler(device.type) if case.precision == "fp16" else None
        self.target: torch.Tensor | None = None
        self.all_finite = torch.ones((), dtype=torch.bool, device=device)
        self.last_loss = torch.zeros((), device=device)

    def __call__(self) -> torch.Tensor:
        with self.autocast():
            output = first_tensor(self.forward(self.batch))
        if output is None:
            raise TypeError("the model's output holds no tensor to take a loss from")
        # fixed from the first call: every step fits the same target
        if self.target is None:
            self.target = torch.randn(output.shape, device=self.device)
        loss = nn.functional.mse_loss(output.float(), self.target)
        (self.scaler.scale(loss) if self.scaler else loss).backward()
        apply_step(self.optimizer, self.scaler)
        self.last_loss = loss.detach()
        # on the device: no sync inside the rounds
        self.all_finite &= torch.isfinite(self.last_loss)
        return self.last_loss

    def figures(self, stats: SampleStats, _result: Any) -> dict[str, Any]:
        # one read, after the rounds
        loss = float(self.last_loss)
        columns = {
            "samples_per_s": self.batch.shape[0] / stats.median_s,
            "step_s": stats.median_s,
            "n_params": self.n_params,
            "train_loss": loss,
        }
        if not bool(self.all_finite):
            raise Diverged(
                f"a training step's loss was not finite (last {loss:.4g})",
                {"train_loss": loss, "n_params": self.n_params},
            )
        return columns


class InferenceStep(Step):
    def __init__(
        self, case: ModelCase, model: nn.Module, spec: ModelSpec, device: torch.device
    ) -> None:
        super().__init__(case, model, spec, device)
        self.model.eval()

    def __call__(self) -> Any:
        with torch.inference_mode(), self.autocast():
            return self.forward(self.batch)

    def figures(self, stats: SampleStats, result: Any) -> dict[str, Any]:
        output = first_tensor(result)
        if output is None or not bool(torch.isfinite(output).all()):
            raise Diverged(
                "the inference output is not finite (NaN or inf)", {"n_params": self.n_params}
            )
        return {
            "samples_per_s": self.batch.shape[0] / stats.median_s,
            "latency_s": stats.median_s,
            "n_params": self.n_params,
        }


def set_up(case: ModelCase, ctx: BuildContext) -> Timed:
    if ctx.model is None:
        raise CaseSkipped(
            "no --model given: name the model as --model module:factory --input SHAPE"
        )
    if reason := precision_skip_reason(case.precision, ctx.device) or compile_skip_reason(
        case.compile_mode
    ):
        raise CaseSkipped(reason)
    # each build a fresh model, batch and target
    torch.manual_seed(ctx.build_index)
    model = make_model(ctx.model)
    if case.checkpointing and (why := enable_checkpointing(model)):
        raise CaseSkipped(why)
    # fp32 is IEEE fp32 (no TF32), as in the suite's training cases
    restore = with_precision("fp32")
    try:
        step = (ModelTrainStep if case.step == "train" else InferenceStep)(
            case, model, ctx.model, ctx.device
        )
    except BaseException:
        restore()
        raise
    return Timed(fn=step, figures=step.figures, cleanup=restore, cpu_memory=step)


# The user's own model is what they came for: every case of it heads the summary.
WORKLOAD = Workload(SPEC, cases, set_up, list)
