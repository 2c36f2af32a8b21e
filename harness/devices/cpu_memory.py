"""Peak memory of one call on the CPU, where no caching allocator keeps a peak."""

from __future__ import annotations

from typing import Any
from collections.abc import Callable

from torch.profiler import ProfilerActivity, profile


def cpu_peak_bytes(fn: Callable[[], Any]) -> int:
    """Allocator-level peak of one call on the CPU: torch.profiler's allocation records summed in
    time order, above what was alive when the call started (process RSS would count the whole
    process: datasets, libraries, earlier cases).

    Reads `kineto_results`, torch's undocumented view of the raw records: the public
    `profile.events()` folds allocations made inside an operator into that operator's total,
    which loses their order, and the order is what makes a peak."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    records = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events() if e.name() == "[memory]")
    current = peak = 0
    for _, nbytes in records:
        current += nbytes
        peak = max(peak, current)
    return peak
