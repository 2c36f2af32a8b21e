"""Out-of-memory strategies made measurable: peak memory against step time for each strategy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from gpubench.harness.measurement.cases import Case, CaseSkipped
from gpubench.harness.catalog.memory_strategies import SPEC
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.measurement.measure import Timed
from gpubench.harness.core.stats import SampleStats
from gpubench.harness.budget.cost_model import Work
from gpubench.harness.measurement.workload import Workload
from gpubench.harness.workloads.common.models import (
    CNN_EFFICIENCY,
    CNN_STEP_LAUNCHES,
    CNN_TRAIN_FLOPS,
    make_model,
)
from gpubench.harness.workloads.common.train_loop import Trainer, precision_skip_reason

BASE_BATCH = 256
# Six training steps of tens of ms each on a CPU: fewer builds. Not one in quick: a step's time can
# sit in one of two modes per process (freezing: 48 or 76 ms in three runs); only builds in separate
# processes show that.


@dataclass(frozen=True)
class StrategyCase(Case):
    workload: ClassVar[str] = "memory_strategies"
    strategy: str
    batch_size: int
    accumulation_steps: int
    precision: str
    checkpointing: bool
    freeze_features: bool

    @property
    def effective_batch(self) -> int:
        return self.batch_size * self.accumulation_steps


def strategies(device: torch.device, base_batch: int = BASE_BATCH) -> list[StrategyCase]:
    # the guide's AMP recipe is fp16 + GradScaler
    amp = "fp16" if device.type == "cuda" else "bf16"
    small = base_batch // 4
    return [
        StrategyCase("baseline", base_batch, 1, "fp32", False, False),
        StrategyCase("smaller_batch", small, 1, "fp32", False, False),
        StrategyCase("amp", base_batch, 1, amp, False, False),
        StrategyCase("accumulation", small, 4, "fp32", False, False),
        StrategyCase("checkpointing", base_batch, 1, "fp32", True, False),
        StrategyCase("freezing", base_batch, 1, "fp32", False, True),
    ]


def cases(ctx: BuildContext) -> list[StrategyCase]:
    return strategies(ctx.device, 32 if ctx.profile == "smoke" else BASE_BATCH)


def set_up(case: StrategyCase, ctx: BuildContext) -> Timed:
    device, data = ctx.device, ctx.data
    if reason := precision_skip_reason(case.precision, device):
        raise CaseSkipped(reason)
    # Only this step's micro-batches go to the device, so the peak is the strategy's own.
    images, labels = data.preloaded(True, torch.device("cpu"))
    spans = [
        slice(i * case.batch_size, (i + 1) * case.batch_size)
        for i in range(case.accumulation_steps)
    ]
    micro = [(images[s].to(device), labels[s].to(device)) for s in spans]
    trainer = Trainer(
        make_model("cnn", case.checkpointing),
        device,
        case.precision,
        case.accumulation_steps,
        case.freeze_features,
        clock=ctx.clock,
    )

    def figures(stats: SampleStats, _result: Any) -> dict[str, Any]:
        return {
            "dataset": data.dataset,
            "effective_batch": case.effective_batch,
            "step_s": stats.median_s,
            "samples_per_s": case.effective_batch / stats.median_s,
        }

    step = lambda: trainer.step(micro)  # noqa: E731
    # cpu_memory: on the CPU the peak is the allocator's over one step (above the weights and
    # optimizer state alive before it), not the process's resident set.
    return Timed(fn=step, figures=figures, cpu_memory=step)


def headline(cases: list[StrategyCase]) -> list[StrategyCase]:
    """The baseline: every other strategy's table row is read against it."""
    return [c for c in cases if c.strategy == "baseline"]


def work(case: StrategyCase, ctx: BuildContext) -> Work:
    # the conv blocks' forward again in backward
    recompute = 4 / 3 if case.checkpointing else 1.0
    return Work(
        flops=case.effective_batch * CNN_TRAIN_FLOPS * recompute,
        dtype=case.precision,
        efficiency=CNN_EFFICIENCY,
        launches=case.accumulation_steps * CNN_STEP_LAUNCHES,
    )


WORKLOAD = Workload(SPEC, cases, set_up, headline, work)
