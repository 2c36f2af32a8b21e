"""Memory-bound elementwise ops: GB/s counting every byte read and written (guide §1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import torch

from harness.cases import Case, CaseSkipped
from harness.device import dtype_skip_reason
from harness.runner import Timed
from harness.stats import SampleStats
from harness.workloads.matmul import TORCH_DTYPES

# op -> (function writing into out, tensors touched per element: inputs read + output written)
OPS: dict[str, tuple[Callable[..., Any], int]] = {
    "add": (lambda a, b, out: torch.add(a, b, out=out), 3),
    "relu": (lambda a, b, out: torch.clamp_min(a, 0, out=out), 2),  # relu has no out= overload
}

LADDERS: dict[tuple[str, str], tuple[int, ...]] = {
    ("smoke", "cpu"): (2**16,),
    ("quick", "cpu"): (2**20, 2**24),
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


def cases(profile: str, device: torch.device) -> list[ElementwiseCase]:
    kind = "cpu" if device.type == "cpu" else "gpu"
    dtypes = ("fp32", "bf16") if profile == "full" else ("fp32",)
    return [ElementwiseCase(op, dtype, n) for op in OPS for dtype in dtypes for n in LADDERS[(profile, kind)]]


def bytes_moved(case: ElementwiseCase) -> int:
    element_bytes = torch.empty((), dtype=TORCH_DTYPES[case.dtype]).element_size()
    return OPS[case.op][1] * case.size * element_bytes


def build(case: ElementwiseCase, device: torch.device, profile: str) -> Timed:
    reason = dtype_skip_reason(device, case.dtype)
    if reason:
        raise CaseSkipped(reason)
    dtype = TORCH_DTYPES[case.dtype]
    a = torch.randn(case.size, device=device).to(dtype)
    b = torch.randn(case.size, device=device).to(dtype)
    out = torch.empty_like(a)
    op = OPS[case.op][0]
    moved = bytes_moved(case)

    def figures(stats: SampleStats, _result: Any) -> dict[str, Any]:
        return {"gbps": moved / stats.median_s / 1e9}

    return Timed(fn=lambda: op(a, b, out), figures=figures)
