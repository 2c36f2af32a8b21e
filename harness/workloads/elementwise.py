"""Memory-bound elementwise ops: GB/s counting every byte read and written. Every ladder ends at a
DRAM-resident size sized by STREAM's rule from this device's last-level cache, so the headline is a
memory figure, not a cache one; each row names its `memory_tier` (cache, mixed, dram) and the cache
it was judged against."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar
from collections.abc import Callable

import torch

from gpubench.harness.core.flags import CACHE
from gpubench.harness.measurement.cases import Case, CaseSkipped
from gpubench.harness.catalog.elementwise import SPEC
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.devices.device import (
    device_memory_bytes,
    dtype_skip_reason,
    last_level_cache_bytes,
)
from gpubench.harness.measurement.measure import Timed
from gpubench.harness.core.peaks import peak_gbps
from gpubench.harness.core.stats import SampleStats
from gpubench.harness.budget.cost_model import Work
from gpubench.harness.measurement.workload import Workload
from gpubench.harness.workloads.common.matmuls import TORCH_DTYPES, device_name

# op -> (function writing into out, tensors touched per element: inputs read + output written)
OPS: dict[str, tuple[Callable[..., Any], int]] = {
    "add": (lambda a, b, out: torch.add(a, b, out=out), 3),
    # relu has no out= overload
    "relu": (lambda a, b, out: torch.clamp_min(a, 0, out=out), 2),
}

LADDERS: dict[tuple[str, str], tuple[int, ...]] = {
    ("smoke", "cpu"): (2**16,),
    ("quick", "cpu"): (2**20,),
    ("full", "cpu"): (2**16, 2**20, 2**22, 2**24, 2**26),
    ("smoke", "gpu"): (2**20,),
    ("quick", "gpu"): (2**20, 2**24, 2**28),
    ("full", "gpu"): (2**16, 2**20, 2**22, 2**24, 2**26, 2**28, 2**30),
}


@dataclass(frozen=True)
class ElementwiseCase(Case):
    workload: ClassVar[str] = "elementwise"
    op: str
    dtype: str
    # elements per tensor
    size: int


# STREAM's rule: each array at least this many times the last-level cache (every instance summed),
# so a stream through it leaves at most a quarter cached under any replacement policy (none under
# LRU). Measured on a 2-core VM with a 32 MiB L3: arrays of 2x (the working set alone 4x, the rule
# before) read bimodal, 29-36 or 51-59 GB/s.
STREAM_FACTOR = 4
# Each array where the cache cannot be read: 256 MiB (fp32 2^26, 4x a 64 MiB cache); on MPS, whose
# cache Metal does not report, 512 MiB (4x the largest Apple system-level cache).
UNKNOWN_CACHE_ARRAY_BYTES = {"mps": 2**29}
DEFAULT_UNKNOWN_ARRAY_BYTES = 2**28
# a, b and out, whichever op reads them
ARRAYS = 3
# randn draws in fp32 before the cast: one such array is alive at a time
DRAW_BYTES = 4
# the arrays take at most a quarter of the device's memory
MEMORY_SHARE = 4


def element_bytes(dtype: str) -> int:
    return torch.empty((), dtype=TORCH_DTYPES[dtype]).element_size()


def bytes_moved(case: ElementwiseCase) -> int:
    return OPS[case.op][1] * case.size * element_bytes(case.dtype)


@dataclass(frozen=True)
class DramSize:
    """The DRAM case's elements per array (a power of two) and what its row must say about them (''
    when STREAM's rule holds against a cache read on this device)."""

    elements: int
    note: str = ""


def mib(size_bytes: int) -> str:
    return f"{size_bytes / 2**20:.0f} MiB"


def dram_elements(
    cache_bytes: int | None,
    element_bytes: int,
    memory_bytes: int | None,
    unknown_array_bytes: int = DEFAULT_UNKNOWN_ARRAY_BYTES,
) -> DramSize:
    """STREAM's rule: the smallest power-of-two count whose every array is >= STREAM_FACTOR x the
    last-level cache (`unknown_array_bytes` per array where the cache is unknown), but no more than
    a quarter of the memory holds."""
    wanted_bytes = STREAM_FACTOR * cache_bytes if cache_bytes else unknown_array_bytes
    elements = 2 ** max(0, math.ceil(math.log2(max(1, math.ceil(wanted_bytes / element_bytes)))))
    note = (
        ""
        if cache_bytes
        else (
            f"last-level cache unknown: each array {mib(elements * element_bytes)} assumed "
            "DRAM-resident (STREAM's rule unchecked)"
        )
    )
    fits = (
        memory_bytes // MEMORY_SHARE // (ARRAYS * element_bytes + DRAW_BYTES)
        if memory_bytes
        else None
    )
    if fits is not None and elements > fits >= 1:
        elements = 2 ** int(math.log2(fits))
        rule = (
            f"below STREAM's {STREAM_FACTOR}x the {mib(cache_bytes)} last-level cache"
            if cache_bytes
            else "last-level cache unknown"
        )
        note = (
            f"each array {mib(elements * element_bytes)}, {rule}: a quarter of the "
            f"{mib(memory_bytes or 0)} memory holds no more"
        )
    return DramSize(elements, note)


def dram_size(device: torch.device, dtype: str) -> DramSize:
    """This device's DRAM case for `dtype`: from its last-level cache and memory (the same in every
    build process)."""
    return dram_elements(
        last_level_cache_bytes(device),
        element_bytes(dtype),
        device_memory_bytes(device),
        UNKNOWN_CACHE_ARRAY_BYTES.get(device.type, DEFAULT_UNKNOWN_ARRAY_BYTES),
    )


def memory_tier(array_bytes: int, working_set_bytes: int, cache_bytes: int | None) -> str:
    """cache: the working set fits the last-level cache; dram: each array follows STREAM's rule;
    mixed between."""
    if cache_bytes is None:
        return "unknown"
    if working_set_bytes <= cache_bytes:
        return "cache"
    return "dram" if array_bytes >= STREAM_FACTOR * cache_bytes else "mixed"


def cases(ctx: BuildContext) -> list[ElementwiseCase]:
    kind = "cpu" if ctx.device.type == "cpu" else "gpu"
    dtypes = ("fp32", "bf16") if ctx.profile == "full" else ("fp32",)
    ladder = LADDERS[(ctx.profile, kind)]
    if ctx.profile == "smoke":
        return [ElementwiseCase(op, dtype, n) for op in OPS for dtype in dtypes for n in ladder]
    sizes = {dtype: sorted({*ladder, dram_size(ctx.device, dtype).elements}) for dtype in dtypes}
    return [ElementwiseCase(op, dtype, n) for op in OPS for dtype in dtypes for n in sizes[dtype]]


def set_up(case: ElementwiseCase, ctx: BuildContext) -> Timed:
    device = ctx.device
    if reason := dtype_skip_reason(device, case.dtype):
        raise CaseSkipped(reason)
    dtype = TORCH_DTYPES[case.dtype]
    a = torch.randn(case.size, device=device).to(dtype)
    b = torch.randn(case.size, device=device).to(dtype)
    out, op, moved = torch.empty_like(a), OPS[case.op][0], bytes_moved(case)
    cache_bytes = last_level_cache_bytes(device)
    tier = memory_tier(case.size * element_bytes(case.dtype), moved, cache_bytes)
    dram = dram_size(device, case.dtype)
    # said on the DRAM case, not on every rung of the ladder
    note = dram.note if case.size == dram.elements else ""
    peak = peak_gbps(device_name(device))

    def figures(stats: SampleStats, _result: Any) -> dict[str, Any]:
        gbps = moved / stats.median_s / 1e9
        return {
            "gbps": gbps,
            "working_set_bytes": moved,
            "memory_tier": tier,
            "llc_total_bytes": cache_bytes,
            "peak_gbps": peak,
            "pct_of_peak_gbps": 100 * gbps / peak if peak and tier == "dram" else None,
            "flags": [CACHE] if tier == "cache" else [],
            "reason": note,
        }

    return Timed(fn=lambda: op(a, b, out), figures=figures)


def headline(cases: list[ElementwiseCase]) -> list[ElementwiseCase]:
    """The first op's largest size, at least the DRAM-sized one: the summary's memory bandwidth
    row."""
    first = [c for c in cases if c.op == cases[0].op and c.dtype == cases[0].dtype] if cases else []
    return [max(first, key=lambda c: c.size)] if first else []


def work(case: ElementwiseCase, ctx: BuildContext) -> Work:
    # the build draws a and b and allocates out, whichever op reads them
    return Work(
        bytes=bytes_moved(case),
        random_values=2 * case.size,
        fresh_bytes=3 * case.size * element_bytes(case.dtype),
    )


WORKLOAD = Workload(SPEC, cases, set_up, headline, work)
