"""The device probe a run plans with (budget.cost_model): matmul rates, copy bandwidth, launch cost,
in about a second. Each timing is synchronized and the best of a few calls after a warm-up: a
planner wants what the device can do."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from gpubench.harness.budget.cost_model import Rates
from gpubench.harness.devices.device import dtype_skip_reason, synchronize

# matmul side: a few ms per call on each kind of device
PROBE_N = {"cpu": 512, "mps": 1024, "cuda": 4096}
COPY_BYTES = {"cpu": 128 * 2**20, "mps": 256 * 2**20, "cuda": 1 * 2**30}
TORCH_DTYPES = {
    "fp32": torch.float32,
    "tf32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
}
RANDN_VALUES = {"cpu": 2**22, "mps": 2**24, "cuda": 2**26}
REPEATS = 5
# A call this long is far above the timer's noise: more repeats of it buy nothing (fp16 matmuls on a
# CPU without native half precision take ~0.15 s each; five of them per dtype tripled the probe).
ENOUGH_S = 0.05
# A fresh interpreter importing torch (a torchrun rank) on a 2-core CPU: a forked build's start is
# no measure of it.
FRESH_START_S = 2.5


def best_s(fn: Callable[[], object], device: torch.device, repeats: int = REPEATS) -> float:
    """The fastest of `repeats` calls after a warm-up (fewer past ENOUGH_S); with repeats=0, the
    first call itself."""
    start = time.perf_counter()
    fn()
    synchronize(device)
    times = [] if repeats else [time.perf_counter() - start]
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
        if sum(times) >= ENOUGH_S:
            break
    return max(min(times), 1e-9)


def matmul_rate(device: torch.device, dtype: str) -> float | None:
    # tf32 off cuda among them
    if dtype_skip_reason(device, dtype):
        return None
    n = PROBE_N.get(device.type, 256)
    a = torch.ones((n, n), device=device, dtype=TORCH_DTYPES[dtype])
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if dtype == "tf32" else "highest")
    try:
        return 2 * n**3 / best_s(lambda: a @ a, device)
    finally:
        torch.set_float32_matmul_precision(previous)


def probe_rates(device: torch.device, process_start_s: float) -> Rates:
    """This device's rates (about a second; no gradients, nothing left allocated)."""
    with torch.no_grad():
        size = COPY_BYTES.get(device.type, COPY_BYTES["cpu"]) // 4
        # first, before an allocator caches
        touch_s = best_s(lambda: torch.empty(size, device=device).fill_(1.0), device, repeats=0)
        flops = {
            dtype: rate
            for dtype in TORCH_DTYPES
            if (rate := matmul_rate(device, dtype)) is not None
        }
        src = torch.ones(size, device=device)
        dst = torch.empty_like(src)
        copy_s = best_s(lambda: dst.copy_(src), device)
        one = torch.ones(1, device=device)
        launch_s = best_s(lambda: [one.add_(1) for _ in range(100)], device) / 100
        values = RANDN_VALUES.get(device.type, RANDN_VALUES["cpu"])
        randn_s = best_s(lambda: torch.randn(values, device=device), device)
    return Rates(
        flops,
        2 * size * 4 / copy_s,
        launch_s,
        values / randn_s,
        size * 4 / touch_s,
        max(process_start_s, FRESH_START_S),
    )
