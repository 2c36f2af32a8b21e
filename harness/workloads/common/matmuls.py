"""Dense matmul parts several workloads share: operands, the fp32 matmul precision, TFLOP/s against
the peak."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from gpubench.harness.core.peaks import peak_tflops
from gpubench.harness.core.stats import SampleStats
from gpubench.harness.devices.device import randn_on, seeded_generator

TORCH_DTYPES = {
    "fp32": torch.float32,
    "tf32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
}


def matmul_tflops(n: int, seconds: float) -> float:
    """2·n³ floating-point operations (a multiply and an add per inner-product term)."""
    return 2 * n**3 / seconds / 1e12


def operands(
    n: int, dtype: str, device: torch.device, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random operands (never zeros: they can run faster than real data) and an output buffer."""
    gen = seeded_generator(device, seed)
    a = randn_on((n, n), device, TORCH_DTYPES[dtype], gen)
    b = randn_on((n, n), device, TORCH_DTYPES[dtype], gen)
    return a, b, torch.empty_like(a)


def with_precision(dtype: str) -> Callable[[], None]:
    """Set the fp32 matmul precision for this case; returns its restore function."""
    previous = torch.get_float32_matmul_precision()
    # high: TF32 tensor cores
    torch.set_float32_matmul_precision("high" if dtype == "tf32" else "highest")
    return lambda: torch.set_float32_matmul_precision(previous)


def tflops_figures(
    n: int, dtype: str, device_name: str
) -> Callable[[SampleStats, Any], dict[str, Any]]:
    def figures(stats: SampleStats, _result: Any) -> dict[str, Any]:
        tflops = matmul_tflops(n, stats.median_s)
        peak = peak_tflops(device_name, dtype)
        return {
            "tflops": tflops,
            "peak_tflops": peak,
            "pct_of_peak": 100 * tflops / peak if peak else None,
        }

    return figures


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else ""


def cpu_computes_natively(dtype: str) -> bool:
    """Whether this CPU's oneDNN has native kernels for the dtype (AVX-512 bf16, AMX fp16...)."""
    if dtype == "bf16":
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    if dtype == "fp16":
        return bool(torch.ops.mkldnn._is_mkldnn_fp16_supported())
    return True
