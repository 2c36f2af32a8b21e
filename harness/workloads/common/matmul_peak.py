"""This machine's own matmul TFLOP/s in a dtype: the ceiling a roofline is drawn against without a
datasheet. Measured once per device, dtype and build, so the cases of one build share it and each
build measures its own."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.measurement.measure import Timed, measure
from gpubench.harness.workloads.common.matmuls import (
    cpu_computes_natively,
    matmul_tflops,
    operands,
    with_precision,
)

# An n×n product that reaches this kind of device's matmul peak in one call of milliseconds to tens
# of them.
GPU_N, CPU_N = 8192, 1024
# A CPU without native bf16/fp16 emulates them at about 1 GFLOP/s up to n=512 (here: 1.39 at n=256,
# 1.35 at n=512), slower past it: the smallest size that still runs tens of milliseconds keeps the
# build cheap.
CPU_EMULATED_N = 256


@dataclass(frozen=True)
class MatmulPeak:
    tflops: float
    n: int


_MEASURED: dict[tuple[str, str, int], MatmulPeak] = {}


def peak_n(device: torch.device, dtype: str) -> int:
    if device.type != "cpu":
        return GPU_N
    return CPU_N if cpu_computes_natively(dtype) else CPU_EMULATED_N


def measured_peak(dtype: str, ctx: BuildContext) -> MatmulPeak:
    """This build's median matmul TFLOP/s, measured on first use."""
    key = (str(ctx.device), dtype, ctx.build_index)
    if key not in _MEASURED:
        n = peak_n(ctx.device, dtype)
        # fp32 is IEEE fp32 (no TF32), as the case's own math
        restore = with_precision(dtype)
        try:
            a, b, out = operands(n, dtype, ctx.device)
            timed = measure(Timed(fn=lambda: torch.matmul(a, b, out=out)), ctx.timing, ctx.clock)
        finally:
            restore()
        _MEASURED[key] = MatmulPeak(matmul_tflops(n, timed.stats.median_s), n)
    return _MEASURED[key]
