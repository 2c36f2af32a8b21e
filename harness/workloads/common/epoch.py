"""What the MNIST epoch and time-to-accuracy workloads share: the case, its loaders and trainer, the
warm-up and compile cost before the clock starts, and an epoch's cost to the planner."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import torch
from torch.utils.data import DataLoader

from gpubench.harness.budget.cost_model import Work
from gpubench.harness.core.plan import RoundPlan
from gpubench.harness.core.stats import summarize
from gpubench.harness.devices.data_source import Batch, DataSource, PreloadedLoader
from gpubench.harness.measurement.cases import Case
from gpubench.harness.measurement.loop import sample, time_call, warm_up
from gpubench.harness.measurement.timing import SyncedClock
from gpubench.harness.workloads.common.models import (
    CNN_EFFICIENCY,
    CNN_FORWARD_FLOPS,
    CNN_STEP_LAUNCHES,
    CNN_TRAIN_FLOPS,
    make_model,
)
from gpubench.harness.workloads.common.train_loop import (
    Trainer,
    compile_skip_reason,
    precision_skip_reason,
)

# smoke's train/test images: it tests the suite, not the machine
SMOKE_IMAGES = (2048, 512)


@dataclass(frozen=True)
class EpochCase(Case):
    """Defaults are the template (a tutorial's usual MNIST setup); a preloaded epoch's DataLoader
    knobs are None."""

    workload: ClassVar[str] = "mnist_epoch"
    batch_size: int = 256
    # dataloader | preloaded
    loader: str = "dataloader"
    num_workers: int | None = 4
    pin_memory: bool | None = True
    non_blocking: bool | None = True
    persistent_workers: bool | None = False
    # None = DataLoader's default (2 per worker)
    prefetch_factor: int | None = None
    precision: str = "fp32"
    # NHWC activations and weights (not in the guide; often the best CPU setting)
    channels_last: bool = False
    compile_mode: str = "none"
    checkpointing: bool = False
    accumulation_steps: int = 1
    freeze_features: bool = False
    model: str = "cnn"
    # precision and channels_last come from this machine's race (epoch_race) at build; placeholders
    # until then
    raced: bool = False

    @property
    def effective_batch(self) -> int:
        return self.batch_size * self.accumulation_steps


TEMPLATE = EpochCase()
PRELOADED = EpochCase(
    loader="preloaded",
    num_workers=None,
    pin_memory=None,
    non_blocking=None,
    persistent_workers=None,
)


def skip_reason(case: EpochCase, device: torch.device) -> str | None:
    if reason := precision_skip_reason(case.precision, device):
        return reason
    if (
        case.loader == "dataloader"
        and not case.num_workers
        and (case.persistent_workers or case.prefetch_factor)
    ):
        return (
            "persistent_workers and prefetch_factor need num_workers > 0 (DataLoader rejects them)"
        )
    return compile_skip_reason(case.compile_mode)


def make_loaders(
    case: EpochCase, data: DataSource, device: torch.device
) -> tuple[Iterable[Batch], Iterable[Batch]]:
    if case.loader == "preloaded":
        return (
            PreloadedLoader(*data.preloaded(True, device), case.batch_size, shuffle=True),
            PreloadedLoader(*data.preloaded(False, device), case.batch_size, shuffle=False),
        )
    options: dict[str, Any] = {
        "batch_size": case.batch_size,
        "num_workers": case.num_workers or 0,
        "pin_memory": bool(case.pin_memory) and device.type == "cuda",
    }
    if case.num_workers:
        options["persistent_workers"] = case.persistent_workers
        if case.prefetch_factor:
            options["prefetch_factor"] = case.prefetch_factor
    return (
        DataLoader(data.image_dataset(True), shuffle=True, **options),
        DataLoader(data.image_dataset(False), shuffle=False, **options),
    )


def data_notes(data: DataSource) -> list[str]:
    notes = []
    if data.dataset == "synthetic":
        notes.append("synthetic data: accuracy is meaningless")
    if data.limit is not None:
        notes.append(f"smoke profile: {data.limit[0]} training images, figures meaningless")
    return notes


def shape_batches(data: DataSource, device: torch.device, batch_size: int) -> list[Batch]:
    """Device batches of every shape an epoch sees (full, and the remainders), so warm-up compiles
    them all."""
    cpu = torch.device("cpu")
    # only the slices go to the device, not the dataset
    images, labels = data.preloaded(True, cpu)
    test_images, test_labels = data.preloaded(False, cpu)
    sizes = {batch_size, labels.shape[0] % batch_size or batch_size}
    train = [(images[:n].to(device), labels[:n].to(device)) for n in sorted(sizes, reverse=True)]
    test_sizes = {batch_size, test_labels.shape[0] % batch_size or batch_size}
    return train + [
        (test_images[:n].to(device), test_labels[:n].to(device))
        for n in sorted(test_sizes, reverse=True)
    ]


@dataclass
class CompileCost:
    # cold: fresh dynamo state and an empty inductor cache
    compile_s: float | None = None
    # the same compile again with the cache the cold one filled
    compile_warm_s: float | None = None
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


def make_trainer(
    case: EpochCase,
    device: torch.device,
    clock: SyncedClock,
    compile_mode: str | None = None,
    seed: int = 0,
    lr: float = 1e-3,
) -> Trainer:
    return Trainer(
        make_model(case.model, case.checkpointing, seed),
        device,
        case.precision,
        case.accumulation_steps,
        case.freeze_features,
        case.compile_mode if compile_mode is None else compile_mode,
        lr=lr,
        channels_last=case.channels_last,
        clock=clock,
    )


def first_call_s(trainer: Trainer, batch: Batch) -> float:
    return time_call(lambda: trainer.step([batch]), trainer.clock)


# device types whose compiler machinery this process has started
_COMPILER_WARMED: set[str] = set()


def warm_compiler(device: torch.device) -> bool:
    """Once per process and device type, a trivial compile: inductor's imports, worker pool and code
    generator start here, not in the first compiled case's `compile_s` (which later cases never
    paid). Returns whether it ran."""
    if device.type in _COMPILER_WARMED:
        return False

    def tiny(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * 2.0 + 1.0)

    torch.compile(tiny)(torch.ones(8, device=device))
    _COMPILER_WARMED.add(device.type)
    return True


@contextmanager
def fresh_compile_caches(device: torch.device) -> Iterator[None]:
    """A compile from scratch (dynamo reset, inductor's caches fresh via `fresh_inductor_cache`),
    else compile_s depends on case order; the compiler is warmed first, outside them, and the user's
    settings return on exit."""
    from torch._inductor.utils import fresh_inductor_cache

    warm_compiler(device)
    with fresh_inductor_cache():
        torch._dynamo.reset()
        yield


def eager_step_seconds(case: EpochCase, trainer: Trainer, batch: Batch) -> float:
    """The same step uncompiled and warmed, on the same batch and clock (its model freed on
    return)."""
    eager = make_trainer(case, trainer.device, trainer.clock, compile_mode="none")
    warm_up(lambda: eager.step([batch]), 2, eager.clock)
    return step_seconds(eager, batch)


def compile_cost(
    case: EpochCase, trainer: Trainer, first: Batch, device: torch.device, warm: bool
) -> CompileCost:
    """The cold first call of `trainer` minus an eager step; with `warm`, a fresh model against the
    filled cache."""
    cost = CompileCost(eager_step_s=eager_step_seconds(case, trainer, first))
    with fresh_compile_caches(device):
        # a warm compile can be shorter than the step's noise: floored at zero, never a negative
        # time
        cost.compile_s = max(0.0, first_call_s(trainer, first) - cost.eager_step_s)
        if warm:
            # keeps the on-disk cache: the next compile is a warm one
            torch._dynamo.reset()
            # the reset also dropped the timed trainer's graphs: warm-up below re-traces them
            fresh = make_trainer(case, device, trainer.clock)
            cost.compile_warm_s = max(0.0, first_call_s(fresh, first) - cost.eager_step_s)
    return cost


def warm_and_cost(
    case: EpochCase, trainer: Trainer, batches: list[Batch], device: torch.device, profile: str
) -> CompileCost:
    """Warm-up outside the samples (library init, allocator growth, every shape compiled), and for
    compiled cases the compile cost (warm-cache too in the full profile)."""
    first, train_shapes = (
        batches[0],
        [b for b in batches if b[0].shape[0] != batches[0][0].shape[0]][:1],
    )
    compiled = case.compile_mode != "none"
    cost = (
        compile_cost(case, trainer, first, device, warm=profile == "full")
        if compiled
        else CompileCost()
    )
    # CUDA graphs record on a later call
    repeats = 3 if case.compile_mode == "reduce-overhead" else 2
    for _ in range(repeats):
        trainer.step([first])
        for batch in train_shapes:
            trainer.step([batch])
        trainer.evaluate(batches)
    if compiled:
        cost.compiled_step_s = step_seconds(trainer, first)
    return cost


# A DataLoader's ToTensor+Normalize per image, in its workers (host seconds per sample, 2-core
# CPUs).
LOADER_S_PER_SAMPLE = 40e-6
# A raced case first races its contestants on a batch: about this much of an epoch.
RACE_EPOCHS = 0.3


def epoch_work(case: EpochCase, profile: str, epochs: float = 1.0) -> Work:
    """`epochs` epochs of training and one evaluation of the case's data."""
    train, test = SMOKE_IMAGES if profile == "smoke" else (60_000, 10_000)
    steps = epochs * train / case.batch_size + test / case.batch_size
    loader_s = LOADER_S_PER_SAMPLE * (epochs * train + test) if case.loader == "dataloader" else 0.0
    return Work(
        flops=epochs * train * CNN_TRAIN_FLOPS + test * CNN_FORWARD_FLOPS,
        dtype=case.precision,
        efficiency=CNN_EFFICIENCY,
        launches=steps * CNN_STEP_LAUNCHES,
        host_s=loader_s,
        calls=1 + (RACE_EPOCHS if case.raced else 0.0),
    )
