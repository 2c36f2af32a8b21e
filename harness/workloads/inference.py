"""Forward passes of the MLP and the CNN under grad, no_grad and inference_mode."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, ClassVar
from collections.abc import Callable

import torch

from gpubench.harness.measurement.cases import Case
from gpubench.harness.catalog.inference import SPEC
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.measurement.measure import Timed
from gpubench.harness.core.stats import SampleStats
from gpubench.harness.measurement.workload import Workload
from gpubench.harness.workloads.common.models import make_model

GRAD_MODES: dict[str, Callable[[], Any]] = {
    "grad": contextlib.nullcontext,
    "no_grad": torch.no_grad,
    "inference_mode": torch.inference_mode,
}
BATCHES = {"smoke": (8,), "quick": (1, 64, 1024), "full": (1, 16, 64, 256, 1024, 4096)}
# A CNN forward of 1024 images takes ~0.4 s on a 2-core CPU: the quick CPU ladder is latency (1)
# and throughput (256) only, so the quick profile stays within its budget there.
CPU_QUICK_BATCHES = (1, 256)


@dataclass(frozen=True)
class InferenceCase(Case):
    workload: ClassVar[str] = "inference"
    model: str
    batch_size: int
    grad_mode: str


def cases(ctx: BuildContext) -> list[InferenceCase]:
    batches = (
        CPU_QUICK_BATCHES
        if ctx.profile == "quick" and ctx.device.type == "cpu"
        else BATCHES[ctx.profile]
    )
    return [InferenceCase(m, b, g) for m in ("mlp", "cnn") for b in batches for g in GRAD_MODES]


def set_up(case: InferenceCase, ctx: BuildContext) -> Timed:
    model = make_model(case.model).to(ctx.device).eval()
    x = torch.randn(case.batch_size, 1, 28, 28, device=ctx.device)
    mode = GRAD_MODES[case.grad_mode]

    def forward() -> None:
        with mode():
            model(x)

    def figures(stats: SampleStats, _result: Any) -> dict[str, Any]:
        return {"samples_per_s": case.batch_size / stats.median_s, "latency_s": stats.median_s}

    return Timed(fn=forward, figures=figures, cpu_memory=forward)


WORKLOAD = Workload(SPEC, cases, set_up)
