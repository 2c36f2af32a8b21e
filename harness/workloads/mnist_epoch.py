"""A full MNIST CNN training epoch (60k train + 10k eval) under every training setting:
input pipeline, precision, channels_last, compile, checkpointing, accumulation, freezing.

The epoch is timed in windows of steps (gpubench.harness.workloads.train_loop.run_epoch), so one epoch
gives a row with raw samples and a spread; `epoch_s` stays the whole epoch. A diverged run
(non-finite loss, or test accuracy near chance on real data) is a failed row, never "fastest"."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from typing import Any, ClassVar
from collections.abc import Iterable

import torch
from torch.utils.data import DataLoader

from gpubench.harness.measurement.cases import Case, CaseSkipped, Diverged
from gpubench.harness.catalog.mnist_epoch import SPEC
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.devices.data_source import Batch, DataSource, PreloadedLoader
from gpubench.harness.devices.datasets import CLASSES
from gpubench.harness.measurement.measure import Timed
from gpubench.harness.core.plan import RoundPlan
from gpubench.harness.core.stats import SampleStats, summarize
from gpubench.harness.measurement.loop import sample, warm_up
from gpubench.harness.measurement.timing import SyncedClock
from gpubench.harness.core.cost_model import Work
from gpubench.harness.measurement.workload import Workload
from gpubench.harness.workloads.epoch_race import apply_winner, race_here, raced_figures
from gpubench.harness.workloads.models import CNN_EFFICIENCY, CNN_FORWARD_FLOPS, CNN_STEP_LAUNCHES, CNN_TRAIN_FLOPS, make_model
from gpubench.harness.workloads.train_loop import (
    COMPILE_MODES, PRECISIONS, EpochResult, Trainer, compile_skip_reason, precision_skip_reason, profile_top_ops, run_epoch,
)

INPUT_BOUND_FRAC = 0.2  # above this share of train time spent waiting for data, the GPU/CPU starves
CHANCE_MARGIN = 0.05  # test accuracy below chance (1/classes) + this on real data: diverged
SMOKE_IMAGES = (2048, 512)  # the smoke profile trains on this many train/test images: it tests the suite, not the machine


@dataclass(frozen=True)
class EpochCase(Case):
    """Defaults are the template (a tutorial's usual MNIST setup): DataLoader with ToTensor+Normalize per image,
    batch 256, num_workers=4, pin_memory=True, non_blocking copies, fp32, no compile.
    A preloaded epoch uses none of the DataLoader's knobs: they are None."""

    workload: ClassVar[str] = "mnist_epoch"
    batch_size: int = 256
    loader: str = "dataloader"  # dataloader | preloaded
    num_workers: int | None = 4
    pin_memory: bool | None = True
    non_blocking: bool | None = True
    persistent_workers: bool | None = False
    prefetch_factor: int | None = None  # None = DataLoader's default (2 per worker)
    precision: str = "fp32"
    channels_last: bool = False  # NHWC activations and weights (not in the guide; often the best CPU setting)
    compile_mode: str = "none"
    checkpointing: bool = False
    accumulation_steps: int = 1
    freeze_features: bool = False
    model: str = "cnn"
    # precision and channels_last come from the race of this machine (gpubench.harness.workloads.epoch_race) when the case is
    # built; the case's own values are placeholders until then
    raced: bool = False

    @property
    def effective_batch(self) -> int:
        return self.batch_size * self.accumulation_steps


TEMPLATE = EpochCase()
PRELOADED = EpochCase(loader="preloaded", num_workers=None, pin_memory=None, non_blocking=None, persistent_workers=None)


def _sweep(base: EpochCase, **axes: Iterable[Any]) -> list[EpochCase]:
    """One-factor-at-a-time sweep around `base` (a full cartesian grid would take days)."""
    return [replace(base, **{name: value}) for name, values in axes.items() for value in values]


def _unique(cases: list[EpochCase]) -> list[EpochCase]:
    return list(dict.fromkeys(cases))


def cases(ctx: BuildContext) -> list[EpochCase]:
    profile, gpu = ctx.profile, ctx.device.type != "cpu"
    amp = "bf16"  # preferred over fp16 wherever supported: no GradScaler needed
    if profile == "smoke":
        return [TEMPLATE, PRELOADED]
    best = replace(PRELOADED, raced=True)  # the fastest precision and memory format, raced on this machine
    if profile == "quick":
        # The template and the raced setting; on a CPU every epoch costs 5-40 s, so the intermediate
        # steps (fp32 preloaded, num_workers=2, bf16 without channels_last) are left to the full profile
        # there (the quick profile must stay within 3 minutes on a 2-core CPU).
        quick = [TEMPLATE, best] if not gpu else [TEMPLATE, PRELOADED, best]
        if gpu:
            quick += [replace(TEMPLATE, num_workers=2), replace(PRELOADED, precision=amp), replace(best, batch_size=1024),
                      replace(best, batch_size=1024, compile_mode="default")]
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
    if case.loader == "dataloader" and not case.num_workers and (case.persistent_workers or case.prefetch_factor):
        return "persistent_workers and prefetch_factor need num_workers > 0 (DataLoader rejects them)"
    return compile_skip_reason(case.compile_mode)


def setting_notes(case: EpochCase, device: torch.device) -> list[str]:
    notes = []
    cores = os.cpu_count() or 1
    if case.loader == "dataloader" and (case.num_workers or 0) > cores:
        notes.append(f"num_workers={case.num_workers} exceeds the {cores} CPU cores")
    if case.loader == "dataloader" and case.pin_memory and device.type != "cuda":
        notes.append("pin_memory has no effect without CUDA")
    return notes


def make_loaders(case: EpochCase, data: DataSource, device: torch.device) -> tuple[Iterable[Batch], Iterable[Batch]]:
    if case.loader == "preloaded":
        return (PreloadedLoader(*data.preloaded(True, device), case.batch_size, shuffle=True),
                PreloadedLoader(*data.preloaded(False, device), case.batch_size, shuffle=False))
    options: dict[str, Any] = {"batch_size": case.batch_size, "num_workers": case.num_workers or 0,
                               "pin_memory": bool(case.pin_memory) and device.type == "cuda"}
    if case.num_workers:
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
    compile_s: float | None = None  # cold: fresh dynamo state and an empty inductor cache
    compile_warm_s: float | None = None  # the same compile again with the cache the cold one filled
    eager_step_s: float | None = None
    compiled_step_s: float | None = None

    @property
    def break_even_steps(self) -> float | None:
        """Steps after which a cold compile has paid for itself; None when it never does."""
        if self.compile_s is None or self.eager_step_s is None or self.compiled_step_s is None:
            return None
        gain_s = self.eager_step_s - self.compiled_step_s
        return max(self.compile_s, 0.0) / gain_s if gain_s > 0 else None


def step_seconds(trainer: Trainer, batch: Batch, rounds: int = 5) -> float:
    plan = RoundPlan(0, 1, rounds, 0.0)
    return summarize(sample(lambda: trainer.step([batch]), plan, trainer.clock)).median_s


def make_trainer(case: EpochCase, device: torch.device, clock: SyncedClock, compile_mode: str | None = None, seed: int = 0,
                 lr: float = 1e-3) -> Trainer:
    return Trainer(make_model(case.model, case.checkpointing, seed), device, case.precision, case.accumulation_steps,
                   case.freeze_features, case.compile_mode if compile_mode is None else compile_mode,
                   lr=lr, channels_last=case.channels_last, clock=clock)


def first_call_s(trainer: Trainer, batch: Batch) -> float:
    start = trainer.clock()
    trainer.step([batch])
    return trainer.clock() - start


_COMPILER_WARMED: set[str] = set()  # device types whose compiler machinery this process has started


def warm_compiler(device: torch.device) -> bool:
    """Once per process and device type, a trivial torch.compile run once: inductor's imports, its
    compile-worker pool and the device's code generator start here, not inside the first compiled
    case's cold `compile_s` (later cases in the process never paid them, so the first was not
    comparable). Returns whether it ran."""
    if device.type in _COMPILER_WARMED:
        return False

    def tiny(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * 2.0 + 1.0)

    torch.compile(tiny)(torch.ones(8, device=device))
    _COMPILER_WARMED.add(device.type)
    return True


class FreshCompileCaches:
    """A compile measured from scratch: dynamo's state reset, inductor's in-memory kernel caches
    cleared and its on-disk caches (inductor, triton) pointed at an empty folder — else a case
    inherits the kernels of the cases before it and compile_s depends on case order. Built on
    torch's own `fresh_inductor_cache`; the user's cache settings come back on exit. The compiler
    machinery is warmed first (once per process), outside the fresh caches."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def __enter__(self) -> FreshCompileCaches:
        from torch._inductor.utils import fresh_inductor_cache

        warm_compiler(self.device)
        self._fresh = fresh_inductor_cache()
        self._fresh.__enter__()
        torch._dynamo.reset()
        return self

    def reset_dynamo(self) -> None:
        torch._dynamo.reset()  # keeps the on-disk cache: the next compile is a warm one

    def __exit__(self, *exc: object) -> None:
        self._fresh.__exit__(*exc)


def eager_step_seconds(case: EpochCase, trainer: Trainer, batch: Batch) -> float:
    """The same step uncompiled, warmed, on the same batch, with the timed trainer's clock (its
    model is freed on return)."""
    eager = make_trainer(case, trainer.device, trainer.clock, compile_mode="none")
    warm_up(lambda: eager.step([batch]), 2, eager.clock)
    return step_seconds(eager, batch)


def compile_cost(case: EpochCase, trainer: Trainer, first: Batch, device: torch.device, warm: bool) -> CompileCost:
    """Eager step, then the cold first call of `trainer` (compile + one step) minus an eager step;
    with `warm`, a second fresh model compiled against the cache the first filled."""
    cost = CompileCost(eager_step_s=eager_step_seconds(case, trainer, first))
    with FreshCompileCaches(device) as caches:
        # a first call minus one eager step; a warm compile can be shorter than the step's own
        # noise, so both are floored at zero rather than published as negative times
        cost.compile_s = max(0.0, first_call_s(trainer, first) - cost.eager_step_s)
        if warm:
            caches.reset_dynamo()
            # the reset also dropped the timed trainer's graphs: warm-up below re-traces them
            cost.compile_warm_s = max(0.0, first_call_s(make_trainer(case, device, trainer.clock), first) - cost.eager_step_s)
    return cost


def warm_and_cost(case: EpochCase, trainer: Trainer, batches: list[Batch], device: torch.device, profile: str) -> CompileCost:
    """Warm-up outside the samples: cuDNN/cuBLAS init, allocator growth and, when compiled, the
    compilation of every shape. For compiled cases also the cold first-call compile time against
    an eager step on the same batch (and, in the full profile, the warm-cache compile)."""
    first, train_shapes = batches[0], [b for b in batches if b[0].shape[0] != batches[0][0].shape[0]][:1]
    cost = CompileCost()
    if case.compile_mode != "none":
        cost = compile_cost(case, trainer, first, device, warm=profile == "full")
    repeats = 3 if case.compile_mode == "reduce-overhead" else 2  # CUDA graphs record on a later call
    for _ in range(repeats):
        trainer.step([first])
        for batch in train_shapes:
            trainer.step([batch])
        trainer.evaluate(batches)
    if case.compile_mode != "none":
        cost.compiled_step_s = step_seconds(trainer, first)
    return cost


def divergence(result: EpochResult, dataset: str) -> str | None:
    """Why this epoch's model is not a result (non-finite loss; accuracy near chance on real data)."""
    if not math.isfinite(result.train_loss):
        return f"train_loss is {result.train_loss} (test accuracy {result.test_accuracy:.3f})"
    chance = 1 / CLASSES
    if dataset != "synthetic" and result.test_accuracy < chance + CHANCE_MARGIN:
        return f"test accuracy {result.test_accuracy:.3f} is near chance ({chance:.2f}); train_loss {result.train_loss:.3g}"
    return None


def epoch_figures(case: EpochCase, data: DataSource, cost: CompileCost, ops: Any) -> Any:
    def figures(stats: SampleStats, result: EpochResult) -> dict[str, Any]:
        why = divergence(result, data.dataset)
        if why:
            raise Diverged(why)
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
            "compile_warm_s": cost.compile_warm_s,
            "eager_step_s": cost.eager_step_s,
            "break_even_steps": cost.break_even_steps,
            "profile_ops": ops() if ops else None,
        }
        notes = []
        if row["input_bound"]:
            notes.append(f"input-bound: {result.data_wait_frac:.0%} of train time waited for data — try loader=preloaded or more num_workers")
        if data.dataset == "synthetic":
            notes.append("synthetic data: accuracy is meaningless")
        if data.limit is not None:
            notes.append(f"smoke profile: {data.limit[0]} training images, figures meaningless")
        if case.compile_mode != "none" and cost.break_even_steps is None:
            notes.append("compiled steps are not faster than eager: compiling never breaks even")
        row["reason"] = "; ".join(notes)
        return row

    return figures


def build(case: EpochCase, ctx: BuildContext) -> Timed:
    device, data = ctx.device, ctx.data
    if ctx.profile == "smoke":
        data = data.subset(*SMOKE_IMAGES)
    race = race_here(ctx) if case.raced else None
    case = apply_winner(case, race) if race is not None else case
    reason = skip_reason(case, device)
    if reason:
        raise CaseSkipped(reason)
    trainer = make_trainer(case, device, ctx.clock)
    train, test = make_loaders(case, data, device)
    shapes = shape_batches(data, device, case.batch_size)
    cost = warm_and_cost(case, trainer, shapes, device, ctx.profile)
    if case.loader == "dataloader" and case.persistent_workers:
        next(iter(train))  # start the workers once, as every epoch after the first finds them
    ops = None
    if data.profile_ops and data.ops_sink is not None:
        ops = lambda: data.ops_sink(case.case_id, profile_top_ops(lambda: trainer.step([shapes[0]]), device))  # noqa: E731
    figures = epoch_figures(case, data, cost, ops)
    return Timed(
        fn=lambda: run_epoch(trainer, train, test, bool(case.non_blocking), ctx.progress),
        figures=raced_figures(figures, case, race) if race is not None else figures,
        plan=RoundPlan(warmup_calls=0, iterations=1, rounds=1, estimate_s=0.0),
        windows=lambda result: result.window_step_s,
        cpu_memory=lambda: trainer.step([shapes[0]]),  # on cpu: the allocator's peak over one training step
        notes=setting_notes(case, device),
        samples_per_call=int(data.split(True).labels.shape[0]),  # the epoch's energy covers eval too: samples trained per joule
        # under a budget: two steps times the epoch's steps, a floor of the epoch (data and eval come on top)
        estimate=lambda: step_seconds(trainer, shapes[0], rounds=2) * math.ceil(len(data.split(True).labels) / case.batch_size),
    )


def headline(cases: list[EpochCase]) -> list[EpochCase]:
    """The template epoch and the raced one: the summary's template and fastest-at-equal-accuracy rows."""
    return [c for c in cases if c in (TEMPLATE, replace(PRELOADED, raced=True))]


# A DataLoader's ToTensor+Normalize per image, in its workers (host seconds per sample, 2-core CPUs).
LOADER_S_PER_SAMPLE = 40e-6
# A raced case first races its contestants on a batch (gpubench.harness.workloads.epoch_race): about this much of an epoch.
RACE_EPOCHS = 0.3


def epoch_work(case: EpochCase, profile: str, epochs: float = 1.0) -> Work:
    """`epochs` epochs of training and one evaluation of the case's data."""
    train, test = SMOKE_IMAGES if profile == "smoke" else (60_000, 10_000)
    steps = epochs * train / case.batch_size + test / case.batch_size
    loader_s = LOADER_S_PER_SAMPLE * (epochs * train + test) if case.loader == "dataloader" else 0.0
    return Work(flops=epochs * train * CNN_TRAIN_FLOPS + test * CNN_FORWARD_FLOPS, dtype=case.precision, efficiency=CNN_EFFICIENCY,
                launches=steps * CNN_STEP_LAUNCHES, host_s=loader_s, calls=1 + (RACE_EPOCHS if case.raced else 0.0))


def work(case: EpochCase, ctx: BuildContext) -> Work:
    return epoch_work(case, str(ctx.profile))


WORKLOAD = Workload(SPEC, cases, build, headline, work)
