"""A 3x3 convolution forward (the MNIST CNN's layer, alone): TFLOP/s per dtype, memory format (NCHW
or channels_last) and, on cuda, cuDNN's autotuner (torch.backends.cudnn.benchmark)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar
from collections.abc import Callable

import torch

from gpubench.harness.measurement.cases import Case, CaseSkipped
from gpubench.harness.catalog.conv2d import SPEC
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.devices.device import dtype_skip_reason, randn_on, seeded_generator
from gpubench.harness.measurement.loop import time_call
from gpubench.harness.measurement.measure import Timed
from gpubench.harness.core.stats import SampleStats
from gpubench.harness.measurement.workload import Workload

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# (batch, channels, height=width) per device kind: ~0.3 GFLOP a call on a CPU, ~60 on a GPU.
SHAPES = {"cpu": (16, 32, 32), "gpu": (64, 128, 56)}
KERNEL = 3


@dataclass(frozen=True)
class ConvCase(Case):
    workload: ClassVar[str] = "conv2d"
    dtype: str
    channels_last: bool
    # None off cuda: there is no cuDNN to tune
    cudnn_benchmark: bool | None
    batch_size: int


def cases(ctx: BuildContext) -> list[ConvCase]:
    kind = "cpu" if ctx.device.type == "cpu" else "gpu"
    batch = 4 if ctx.profile == "smoke" else SHAPES[kind][0]
    tunings: tuple[bool | None, ...] = (False, True) if ctx.device.type == "cuda" else (None,)
    return [
        ConvCase(dtype, cl, tuning, batch)
        for dtype in DTYPES
        for cl in (False, True)
        for tuning in tunings
    ]


def conv_tflops(batch: int, channels: int, size: int, seconds: float) -> float:
    """2·N·C_out·H·W·C_in·k² operations (same padding: the output is H×W)."""
    return 2 * batch * channels * size * size * channels * KERNEL * KERNEL / seconds / 1e12


def backend_flags(case: ConvCase, device: torch.device) -> Callable[[], None]:
    """cuDNN's autotuner as the case says; returns its restore function. (The runner sets cuDNN's
    TF32 per case for every workload: fp32 here is IEEE fp32.)"""
    previous = torch.backends.cudnn.benchmark
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = bool(case.cudnn_benchmark)
    return lambda: setattr(torch.backends.cudnn, "benchmark", previous)


def set_up(case: ConvCase, ctx: BuildContext) -> Timed:
    if reason := dtype_skip_reason(ctx.device, case.dtype):
        raise CaseSkipped(reason)
    _, channels, size = SHAPES["cpu" if ctx.device.type == "cpu" else "gpu"]
    memory_format = torch.channels_last if case.channels_last else torch.contiguous_format
    x = randn_on(
        (case.batch_size, channels, size, size),
        ctx.device,
        DTYPES[case.dtype],
        seeded_generator(ctx.device, 0),
    ).contiguous(memory_format=memory_format)
    conv = torch.nn.Conv2d(channels, channels, KERNEL, padding=KERNEL // 2, bias=False)
    conv = conv.to(ctx.device, DTYPES[case.dtype], memory_format=memory_format).eval()
    restore = backend_flags(case, ctx.device)

    def forward() -> torch.Tensor:
        with torch.inference_mode():
            return conv(x)

    def figures(stats: SampleStats, _result: Any) -> dict[str, Any]:
        return {
            "tflops": conv_tflops(case.batch_size, channels, size, stats.median_s),
            "samples_per_s": case.batch_size / stats.median_s,
            "latency_s": stats.median_s,
        }

    def estimate_s() -> float:
        """One sample's forward times the batch: a half-precision batch with no native CPU kernel is
        known to be too slow before it runs."""
        with torch.inference_mode():
            # one-time costs (the kernel's selection) are not the call's
            conv(x[:1])
            return time_call(lambda: conv(x[:1]), ctx.clock) * case.batch_size

    return Timed(fn=forward, figures=figures, cleanup=restore, estimate=estimate_s)


WORKLOAD = Workload(SPEC, cases, set_up)
