"""What a case will cost before it is built (no torch): one call's work (FLOPs, bytes, launches,
host seconds) scaled by the device's probed rates (devices.rates), for machines without history.
Good to about a factor of two: each row keeps its prediction beside what it cost."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from gpubench.harness.core.plan import BuildTiming, plan_rounds


@dataclass(frozen=True)
class Rates:
    """This device, probed: matmul FLOP/s per dtype, memory bytes/s, one small kernel's seconds
    (launch or dispatch) and a fresh interpreter's start with torch (what a launched worker pays
    before its first step)."""

    flops_per_s: dict[str, float]
    bytes_per_s: float
    launch_s: float
    # normal random values drawn per second (a case's operands)
    randn_per_s: float = 1e8
    # memory written for the first time (page faults: slow in a VM)
    touch_bytes_per_s: float = 1e9
    process_start_s: float = 3.0

    def flops_rate(self, dtype: str) -> float:
        """The probed rate of `dtype`, else fp32's (a dtype the probe did not time)."""
        return self.flops_per_s.get(dtype) or self.flops_per_s.get("fp32") or 1e9


@dataclass(frozen=True)
class Work:
    """One call of a case. `efficiency`: the share of the probed matmul rate it reaches; `host_s`:
    host work the rates do not scale (per-sample transforms); `setup_s`: per build outside calls;
    `calls`: fixed calls per build (an epoch: 1), None to plan them from the profile's rounds."""

    flops: float = 0.0
    dtype: str = "fp32"
    efficiency: float = 1.0
    bytes: float = 0.0
    launches: float = 1.0
    host_s: float = 0.0
    setup_s: float = 0.0
    # normal random values drawn for the operands when the case is built
    random_values: float = 0.0
    # memory the build allocates and touches for the first time
    fresh_bytes: float = 0.0
    # fresh interpreters' starts the build waits for, one after another
    processes: float = 0
    calls: float | None = None


def call_s(work: Work, rates: Rates) -> float:
    compute_s = work.flops / (rates.flops_rate(work.dtype) * max(work.efficiency, 1e-6))
    return compute_s + work.bytes / rates.bytes_per_s + work.launches * rates.launch_s + work.host_s


# A build outside its calls: making the case (tensors, a model) and its row; seen on 2-core CPUs.
BUILD_OVERHEAD_S = 0.05


def predicted_build_s(work: Work, rates: Rates, timing: BuildTiming) -> tuple[float, float]:
    """(the build's seconds, its first call's seconds) as the planner expects them."""
    one_s = call_s(work, rates)
    if work.calls is not None:
        calls = work.calls
    # the profile's warm-up and rounds
    else:
        plan = plan_rounds(one_s, timing)
        calls = (
            plan.warmup_calls
            + plan.rounds * plan.iterations
            + (plan.iterations if plan.iterations > 1 else 0)
        )
    start_s = rates.process_start_s * work.processes
    setup_s = (
        work.setup_s
        + work.random_values / rates.randn_per_s
        + work.fresh_bytes / rates.touch_bytes_per_s
        + start_s
    )
    build_s = BUILD_OVERHEAD_S + setup_s + calls * one_s
    return (build_s if math.isfinite(build_s) else 1e9), one_s


def prediction_line(builds: list[tuple[float, float]]) -> str | None:
    """How the cost model did over (measured, predicted) build seconds; None for fewer than
    three."""
    ratios = [
        measured_s / predicted_s
        for measured_s, predicted_s in builds
        if predicted_s > 0 and measured_s >= 0
    ]
    if len(ratios) < 3:
        return None
    low, middle, high = statistics.quantiles(ratios, n=4, method="inclusive")
    return (
        f"cost model: the {len(ratios)} case builds it priced before their first row took "
        f"{middle:.2f}x its prediction (median; middle half {low:.2f}-{high:.2f}x)"
    )
