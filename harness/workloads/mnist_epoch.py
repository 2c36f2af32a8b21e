"""A full MNIST CNN training epoch (60k train + 10k eval) under every setting of guide §5–§8."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Iterable

import torch
from torch.utils.data import DataLoader

from harness.cases import Case, CaseSkipped
from harness.runner import Build, Timed
from harness.stats import SampleStats, summarize
from harness.timing import RoundPlan, sample, warm_up
from harness.workloads.data_source import Batch, DataSource, PreloadedLoader
from harness.workloads.models import make_model
from harness.workloads.train_loop import (COMPILE_MODES, PRECISIONS, EpochResult, Trainer, precision_skip_reason,
                                          profile_top_ops, run_epoch)

INPUT_BOUND_FRAC = 0.2  # above this share of train time spent waiting for data, the GPU/CPU starves


@dataclass(frozen=True)
class EpochCase(Case):
    """Defaults are the guide's template (§5): DataLoader with ToTensor+Normalize per image,
    batch 256, num_workers=4, pin_memory=True, non_blocking copies, fp32, no compile."""

    workload: ClassVar[str] = "mnist_epoch"
    defaults_label: ClassVar[str] = "guide-template"
    batch_size: int = 256
    loader: str = "dataloader"  # dataloader | preloaded
    num_workers: int = 4
    pin_memory: bool = True
    non_blocking: bool = True
    persistent_workers: bool = False
    prefetch_factor: int = 0  # 0 = DataLoader's default (2 per worker)
    precision: str = "fp32"
    channels_last: bool = False  # NHWC activations and weights (not in the guide; often the best CPU setting)
    compile_mode: str = "none"
    checkpointing: bool = False
    accumulation_steps: int = 1
    freeze_features: bool = False
    model: str = "cnn"

    @property
    def effective_batch(self) -> int:
        return self.batch_size * self.accumulation_steps


TEMPLATE = EpochCase()
PRELOADED = EpochCase(loader="preloaded", num_workers=0, pin_memory=False, non_blocking=False)


def _sweep(base: EpochCase, **axes: Iterable[Any]) -> list[EpochCase]:
    """One-factor-at-a-time sweep around `base` (a full cartesian grid would take days)."""
    return [replace(base, **{name: value}) for name, values in axes.items() for value in values]


def _unique(cases: list[EpochCase]) -> list[EpochCase]:
    return list(dict.fromkeys(cases))


def cases(profile: str, device: torch.device) -> list[EpochCase]:
    gpu = device.type != "cpu"
    amp = "bf16"  # preferred over fp16 wherever supported: no GradScaler needed (guide §7.1)
    if profile == "smoke":
        return [TEMPLATE, PRELOADED]
    best = replace(PRELOADED, precision=amp, channels_last=True)
    if profile == "quick":
        quick = [TEMPLATE, replace(TEMPLATE, num_workers=2), PRELOADED, replace(PRELOADED, precision=amp), best]
        if gpu:
            quick += [replace(best, batch_size=1024), replace(best, batch_size=1024, compile_mode="default")]
        return _unique(quick)
    full = [TEMPLATE, PRELOADED]
    full += _sweep(TEMPLATE, num_workers=(0, 1, 2, 8), pin_memory=(False,), non_blocking=(False,), persistent_workers=(True,), prefetch_factor=(4, 8))
    full += _sweep(PRELOADED, batch_size=(64, 128, 512, 1024, 2048), precision=PRECISIONS[1:],
                   channels_last=(True,), compile_mode=COMPILE_MODES[1:], checkpointing=(True,),
                   accumulation_steps=(4,), freeze_features=(True,))
    full += [replace(PRELOADED, batch_size=64, accumulation_steps=4), best, replace(best, batch_size=1024),
             replace(best, batch_size=1024, compile_mode="default"), replace(best, compile_mode="default")]
    return _unique(full)


def skip_reason(case: EpochCase, device: torch.device) -> str | None:
    reason = precision_skip_reason(case.precision, device)
    if reason:
        return reason
    if case.loader == "dataloader" and case.num_workers == 0 and (case.persistent_workers or case.prefetch_factor):
        return "persistent_workers and prefetch_factor need num_workers > 0 (DataLoader rejects them)"
    if case.compile_mode != "none" and not hasattr(torch, "compile"):
        return "torch.compile is not available in this PyTorch"
    return None


def setting_notes(case: EpochCase, device: torch.device) -> list[str]:
    notes = []
    cores = os.cpu_count() or 1
    if case.loader == "dataloader" and case.num_workers > cores:
        notes.append(f"num_workers={case.num_workers} exceeds the {cores} CPU cores")
    if case.loader == "dataloader" and case.pin_memory and device.type != "cuda":
        notes.append("pin_memory has no effect without CUDA")
    return notes


def make_loaders(case: EpochCase, data: DataSource, device: torch.device) -> tuple[Iterable[Batch], Iterable[Batch]]:
    if case.loader == "preloaded":
        return (PreloadedLoader(*data.preloaded(True, device), case.batch_size, shuffle=True),
                PreloadedLoader(*data.preloaded(False, device), case.batch_size, shuffle=False))
    options: dict[str, Any] = {"batch_size": case.batch_size, "num_workers": case.num_workers,
                               "pin_memory": case.pin_memory and device.type == "cuda"}
    if case.num_workers > 0:
        options["persistent_workers"] = case.persistent_workers
        if case.prefetch_factor:
            options["prefetch_factor"] = case.prefetch_factor
    return (DataLoader(data.image_dataset(True), shuffle=True, **options),
            DataLoader(data.image_dataset(False), shuffle=False, **options))


def shape_batches(data: DataSource, device: torch.device, batch_size: int) -> list[Batch]:
    """Device batches of every shape an epoch will see (full, and the train/test remainders), so
    warm-up compiles and autotunes all of them before the clock starts."""
    cpu = torch.device("cpu")
    images, labels = data.preloaded(True, cpu)  # only the slices go to the device, not the dataset
    test_images, test_labels = data.preloaded(False, cpu)
    sizes = {batch_size, labels.shape[0] % batch_size or batch_size}
    train = [(images[:n].to(device), labels[:n].to(device)) for n in sorted(sizes, reverse=True)]
    test_sizes = {batch_size, test_labels.shape[0] % batch_size or batch_size}
    return train + [(test_images[:n].to(device), test_labels[:n].to(device)) for n in sorted(test_sizes, reverse=True)]


@dataclass
class CompileCost:
    compile_s: float | None = None
    eager_step_s: float | None = None
    compiled_step_s: float | None = None

    @property
    def break_even_steps(self) -> float | None:
        """Steps after which compiling has paid for itself; None when it never does."""
        if self.compile_s is None or self.eager_step_s is None or self.compiled_step_s is None:
            return None
        gain_s = self.eager_step_s - self.compiled_step_s
        return max(self.compile_s, 0.0) / gain_s if gain_s > 0 else None


def step_seconds(trainer: Trainer, batch: Batch, rounds: int = 5) -> float:
    plan = RoundPlan(0, 1, rounds, 0.0)
    return summarize(sample(lambda: trainer.step([batch]), plan)).median_s


def warm_and_cost(case: EpochCase, trainer: Trainer, batches: list[Batch], device: torch.device) -> CompileCost:
    """Warm-up outside the samples: cuDNN/cuBLAS init, allocator growth and, when compiled, the
    compilation of every shape. For compiled cases also the first-call compile time against an
    eager step, measured on the same batch."""
    first, train_shapes = batches[0], [b for b in batches if b[0].shape[0] != batches[0][0].shape[0]][:1]
    cost = CompileCost()
    if case.compile_mode != "none":
        eager = Trainer(make_model(case.model, case.checkpointing), device, case.precision, 1, case.freeze_features,
                        channels_last=case.channels_last)
        warm_up(lambda: eager.step([first]), 2)
        cost.eager_step_s = step_seconds(eager, first)
        del eager
        cost.compile_s = warm_up(lambda: trainer.step([first]), 1) - cost.eager_step_s
    repeats = 3 if case.compile_mode == "reduce-overhead" else 2  # CUDA graphs record on a later call
    for _ in range(repeats):
        trainer.step([first])
        for batch in train_shapes:
            trainer.step([batch])
        trainer.evaluate(batches)
    if case.compile_mode != "none":
        cost.compiled_step_s = step_seconds(trainer, first)
    return cost


def epoch_figures(case: EpochCase, data: DataSource, cost: CompileCost, ops: Any) -> Any:
    def figures(stats: SampleStats, result: EpochResult) -> dict[str, Any]:
        row: dict[str, Any] = {
            "dataset": data.dataset,
            "effective_batch": case.effective_batch,
            "epoch_s": result.epoch_s,
            "samples_per_s": result.samples / result.train_s,
            "step_s": result.train_s / max(result.steps, 1),
            "data_wait_frac": result.data_wait_frac,
            "input_bound": result.data_wait_frac > INPUT_BOUND_FRAC,
            "train_loss": result.train_loss,
            "test_accuracy": result.test_accuracy,
            "compile_s": cost.compile_s,
            "eager_step_s": cost.eager_step_s,
            "break_even_steps": cost.break_even_steps,
            "profile_ops": ops() if ops else None,
        }
        notes = []
        if row["input_bound"]:
            notes.append(f"input-bound: {result.data_wait_frac:.0%} of train time waited for data — try loader=preloaded or more num_workers")
        if data.dataset == "synthetic":
            notes.append("synthetic data: accuracy is meaningless")
        if case.compile_mode != "none" and cost.break_even_steps is None:
            notes.append("compiled steps are not faster than eager: compiling never breaks even")
        row["reason"] = "; ".join(notes)
        return row

    return figures


def builder(data: DataSource) -> Build:
    def build(case: EpochCase, device: torch.device, profile: str) -> Timed:
        reason = skip_reason(case, device)
        if reason:
            raise CaseSkipped(reason)
        trainer = Trainer(make_model(case.model, case.checkpointing), device, case.precision,
                          case.accumulation_steps, case.freeze_features, case.compile_mode, channels_last=case.channels_last)
        train, test = make_loaders(case, data, device)
        shapes = shape_batches(data, device, case.batch_size)
        cost = warm_and_cost(case, trainer, shapes, device)
        if case.loader == "dataloader" and case.persistent_workers:
            next(iter(train))  # start the workers once, as every epoch after the first finds them
        ops = None
        if data.profile_ops and data.ops_sink is not None:
            ops = lambda: data.ops_sink(case.case_id, profile_top_ops(lambda: trainer.step([shapes[0]]), device))  # noqa: E731
        return Timed(
            fn=lambda: run_epoch(trainer, train, test, case.non_blocking),
            figures=epoch_figures(case, data, cost, ops),
            plan=RoundPlan(warmup_calls=0, iterations=1, rounds=1, estimate_s=0.0),
            notes=setting_notes(case, device),
        )

    return build
