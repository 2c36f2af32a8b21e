"""A full MNIST CNN training epoch (60k train + 10k eval) under every training setting, timed in
windows of steps so one epoch gives samples and a spread; a diverged run is a failed row, never
"fastest"."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any
from collections.abc import Iterable

import torch

from gpubench.harness.measurement.cases import CaseSkipped, Diverged
from gpubench.harness.catalog.mnist_epoch import SPEC
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.devices.data_source import DataSource
from gpubench.harness.devices.datasets import CLASSES
from gpubench.harness.devices.cpu_limits import usable_cores
from gpubench.harness.measurement.measure import Timed
from gpubench.harness.core.plan import RoundPlan
from gpubench.harness.core.stats import SampleStats
from gpubench.harness.budget.cost_model import Work
from gpubench.harness.measurement.workload import Workload
from gpubench.harness.workloads.common.epoch import (
    PRELOADED,
    SMOKE_IMAGES,
    TEMPLATE,
    CompileCost,
    EpochCase,
    data_notes,
    epoch_work,
    make_loaders,
    make_trainer,
    shape_batches,
    skip_reason,
    step_seconds,
    warm_and_cost,
)
from gpubench.harness.workloads.common.epoch_race import apply_winner, race_here, raced_figures
from gpubench.harness.workloads.common.train_loop import (
    COMPILE_MODES,
    PRECISIONS,
    EpochResult,
    profile_top_ops,
    run_epoch,
)

# above this share of train time spent waiting for data, the GPU/CPU starves
INPUT_BOUND_FRAC = 0.2
# test accuracy below chance (1/classes) + this on real data: diverged
CHANCE_MARGIN = 0.05


def _sweep(base: EpochCase, **axes: Iterable[Any]) -> list[EpochCase]:
    """One-factor-at-a-time sweep around `base` (a full cartesian grid would take days)."""
    return [replace(base, **{name: value}) for name, values in axes.items() for value in values]


def cases(ctx: BuildContext) -> list[EpochCase]:
    profile, gpu = ctx.profile, ctx.device.type != "cpu"
    # preferred over fp16 wherever supported: no GradScaler needed
    amp = "bf16"
    if profile == "smoke":
        return [TEMPLATE, PRELOADED]
    # the fastest precision and memory format, raced on this machine
    best = replace(PRELOADED, raced=True)
    if profile == "quick":
        # The template and the raced setting; on a CPU every epoch costs 5-40 s, so the intermediate
        # steps are left to the full profile there (quick must stay within its budget on a 2-core
        # CPU).
        quick = [TEMPLATE, best] if not gpu else [TEMPLATE, PRELOADED, best]
        if gpu:
            quick += [
                replace(TEMPLATE, num_workers=2),
                replace(PRELOADED, precision=amp),
                replace(best, batch_size=1024),
                replace(best, batch_size=1024, compile_mode="default"),
            ]
        return list(dict.fromkeys(quick))
    full = [TEMPLATE, PRELOADED]
    full += _sweep(
        TEMPLATE,
        num_workers=(0, 1, 2, 8),
        pin_memory=(False,),
        non_blocking=(False,),
        persistent_workers=(True,),
        prefetch_factor=(4, 8),
    )
    full += _sweep(
        PRELOADED,
        batch_size=(64, 128, 512, 1024, 2048),
        precision=PRECISIONS[1:],
        channels_last=(True,),
        compile_mode=COMPILE_MODES[1:],
        checkpointing=(True,),
        accumulation_steps=(4,),
        freeze_features=(True,),
    )
    full += [
        replace(PRELOADED, batch_size=64, accumulation_steps=4),
        best,
        replace(best, batch_size=1024),
        replace(best, batch_size=1024, compile_mode="default"),
        replace(best, compile_mode="default"),
    ]
    return list(dict.fromkeys(full))


def setting_notes(case: EpochCase, device: torch.device) -> list[str]:
    notes = []
    # the run's cores (taskset, a container's quota), not the machine's
    cores = usable_cores()
    if case.loader == "dataloader" and (case.num_workers or 0) > cores:
        notes.append(f"num_workers={case.num_workers} exceeds the {cores} CPU cores")
    if case.loader == "dataloader" and case.pin_memory and device.type != "cuda":
        notes.append("pin_memory has no effect without CUDA")
    return notes


def divergence(result: EpochResult, dataset: str) -> str | None:
    """Why this epoch's model is not a result (non-finite loss; accuracy near chance on real
    data)."""
    if not math.isfinite(result.train_loss):
        return f"train_loss is {result.train_loss} (test accuracy {result.test_accuracy:.3f})"
    chance = 1 / CLASSES
    if dataset != "synthetic" and result.test_accuracy < chance + CHANCE_MARGIN:
        return (
            f"test accuracy {result.test_accuracy:.3f} is near chance ({chance:.2f}); "
            f"train_loss {result.train_loss:.3g}"
        )
    return None


def epoch_figures(case: EpochCase, data: DataSource, cost: CompileCost, ops: Any) -> Any:
    def figures(stats: SampleStats, result: EpochResult) -> dict[str, Any]:
        if why := divergence(result, data.dataset):
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
        notes = data_notes(data)
        if row["input_bound"]:
            notes.insert(
                0,
                f"input-bound: {result.data_wait_frac:.0%} of train time waited for data — "
                "try loader=preloaded or more num_workers",
            )
        if case.compile_mode != "none" and cost.break_even_steps is None:
            notes.append("compiled steps are not faster than eager: compiling never breaks even")
        row["reason"] = "; ".join(notes)
        return row

    return figures


def set_up(case: EpochCase, ctx: BuildContext) -> Timed:
    device, data = ctx.device, ctx.data
    if ctx.profile == "smoke":
        data = data.subset(*SMOKE_IMAGES)
    race = race_here(ctx) if case.raced else None
    case = apply_winner(case, race) if race is not None else case
    if reason := skip_reason(case, device):
        raise CaseSkipped(reason)
    trainer = make_trainer(case, device, ctx.clock)
    train, test = make_loaders(case, data, device)
    shapes = shape_batches(data, device, case.batch_size)
    cost = warm_and_cost(case, trainer, shapes, device, ctx.profile)
    if case.loader == "dataloader" and case.persistent_workers:
        # start the workers once, as every epoch after the first finds them
        next(iter(train))
    ops = None
    if data.profile_ops and data.ops_sink is not None:
        ops = lambda: data.ops_sink(  # noqa: E731
            case.case_id, profile_top_ops(lambda: trainer.step([shapes[0]]), device)
        )
    figures = epoch_figures(case, data, cost, ops)
    return Timed(
        fn=lambda: run_epoch(trainer, train, test, bool(case.non_blocking), ctx.progress),
        figures=raced_figures(figures, case, race) if race is not None else figures,
        plan=RoundPlan(warmup_calls=0, iterations=1, rounds=1, estimate_s=0.0),
        windows=lambda result: result.window_step_s,
        # on cpu: the allocator's peak over one training step
        cpu_memory=lambda: trainer.step([shapes[0]]),
        notes=setting_notes(case, device),
        # the epoch's energy covers eval too: samples trained per joule
        samples_per_call=int(data.split(True).labels.shape[0]),
        # under a budget: two steps times the epoch's steps, a floor of the epoch (data and eval
        # come on top)
        estimate=lambda: (
            step_seconds(trainer, shapes[0], rounds=2)
            * math.ceil(len(data.split(True).labels) / case.batch_size)
        ),
    )


def headline(cases: list[EpochCase]) -> list[EpochCase]:
    """The template epoch and the raced one: the summary's template and fastest-at-equal-accuracy
    rows."""
    return [c for c in cases if c in (TEMPLATE, replace(PRELOADED, raced=True))]


def work(case: EpochCase, ctx: BuildContext) -> Work:
    return epoch_work(case, str(ctx.profile))


WORKLOAD = Workload(SPEC, cases, set_up, headline, work)
