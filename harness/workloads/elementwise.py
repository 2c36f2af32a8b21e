"""Memory-bound elementwise ops: GB/s counting every byte read and written. Every ladder ends at a DRAM-resident
size, so the headline is a memory figure, not a cache one; each row names its `memory_tier` (cache, mixed, dram)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar
from collections.abc import Callable

import torch

from gpubench.harness.measurement.cases import Case, CaseSkipped
from gpubench.harness.catalog.elementwise import SPEC
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.devices.device import dtype_skip_reason
from gpubench.harness.devices.env import llc_bytes
from gpubench.harness.measurement.measure import Timed
from gpubench.harness.core.peaks import peak_gbps
from gpubench.harness.core.stats import SampleStats
from gpubench.harness.core.cost_model import Work
from gpubench.harness.measurement.workload import Workload
from gpubench.harness.workloads.common.matmuls import TORCH_DTYPES

# op -> (function writing into out, tensors touched per element: inputs read + output written)
OPS: dict[str, tuple[Callable[..., Any], int]] = {
    "add": (lambda a, b, out: torch.add(a, b, out=out), 3),
    "relu": (lambda a, b, out: torch.clamp_min(a, 0, out=out), 2),  # relu has no out= overload
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
    size: int  # elements per tensor


# A working set this many times the last-level cache is DRAM-resident: a stream through it leaves at most
# a quarter cached under any replacement policy (none under LRU). Twice that costs a CPU build 10 s more.
DRAM_FACTOR = 4
UNKNOWN_LLC_BYTES = 64 * 2**20  # assumed where the cache size cannot be read


def element_bytes(dtype: str) -> int:
    return torch.empty((), dtype=TORCH_DTYPES[dtype]).element_size()


def bytes_moved(case: ElementwiseCase) -> int:
    return OPS[case.op][1] * case.size * element_bytes(case.dtype)


def dram_size(op: str, dtype: str, llc: int | None) -> int:
    """Smallest power-of-two element count whose working set is >= DRAM_FACTOR x the LLC."""
    per_element = OPS[op][1] * element_bytes(dtype)
    n = 1
    while n * per_element < DRAM_FACTOR * (llc or UNKNOWN_LLC_BYTES):
        n *= 2
    return n


def memory_tier(working_set_bytes: int, llc: int | None) -> str:
    if llc is None:
        return "unknown"
    if working_set_bytes <= llc:
        return "cache"
    return "dram" if working_set_bytes >= DRAM_FACTOR * llc else "mixed"


def cases(ctx: BuildContext) -> list[ElementwiseCase]:
    kind = "cpu" if ctx.device.type == "cpu" else "gpu"
    dtypes = ("fp32", "bf16") if ctx.profile == "full" else ("fp32",)
    llc = llc_bytes(ctx.device)
    ladder = LADDERS[(ctx.profile, kind)]
    return [ElementwiseCase(op, dtype, n) for op in OPS for dtype in dtypes
            for n in (ladder if ctx.profile == "smoke" else sorted({*ladder, dram_size(op, dtype, llc)}))]


def build(case: ElementwiseCase, ctx: BuildContext) -> Timed:
    device = ctx.device
    if reason := dtype_skip_reason(device, case.dtype):
        raise CaseSkipped(reason)
    dtype = TORCH_DTYPES[case.dtype]
    a = torch.randn(case.size, device=device).to(dtype)
    b = torch.randn(case.size, device=device).to(dtype)
    out, op, moved = torch.empty_like(a), OPS[case.op][0], bytes_moved(case)
    tier = memory_tier(moved, llc_bytes(device))
    peak = peak_gbps(torch.cuda.get_device_name(device) if device.type == "cuda" else "")

    def figures(stats: SampleStats, _result: Any) -> dict[str, Any]:
        gbps = moved / stats.median_s / 1e9
        return {"gbps": gbps, "working_set_bytes": moved, "memory_tier": tier, "peak_gbps": peak,
                "pct_of_peak_gbps": 100 * gbps / peak if peak and tier == "dram" else None,
                "flags": ["cache"] if tier == "cache" else []}

    return Timed(fn=lambda: op(a, b, out), figures=figures)


def headline(cases: list[ElementwiseCase]) -> list[ElementwiseCase]:
    """The first op's largest size, the DRAM-sized one: the summary's memory bandwidth row."""
    first = [c for c in cases if c.op == cases[0].op and c.dtype == cases[0].dtype] if cases else []
    return [max(first, key=lambda c: c.size)] if first else []


def work(case: ElementwiseCase, ctx: BuildContext) -> Work:
    # the build draws a and b and allocates out, whichever op reads them
    return Work(bytes=bytes_moved(case), random_values=2 * case.size,
                fresh_bytes=3 * case.size * element_bytes(case.dtype))


WORKLOAD = Workload(SPEC, cases, build, headline, work)
