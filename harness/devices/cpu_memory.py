"""Peak memory of one call on the CPU, where no caching allocator keeps a peak."""

from __future__ import annotations

from typing import Any
from collections.abc import Callable

from torch.profiler import ProfilerActivity, profile


def cpu_peak_bytes(fn: Callable[[], Any]) -> int:
    """Allocator-level peak above what was alive at the start (RSS would count datasets, libraries, earlier cases).
    Reads the undocumented `kineto_results`: `profile.events()` loses the allocations' time order that makes a peak."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = prof.profiler.kineto_results.events()
    records = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
    current = peak = 0
    for _, nbytes in records:
        current += nbytes
        peak = max(peak, current)
    return peak
