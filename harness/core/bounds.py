"""The bound of each derived figure: past it no measurement can be right, whatever the machine. The
row writer flags a row past one `impossible` and says which in its reason; the report applies the
same bounds to rows written before the flag, and keeps such rows out of its summary, its answer and
the health verdicts. Torch-free: reports use it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpubench.harness.core.flags import IMPOSSIBLE
from gpubench.harness.core.peaks import peak_gbps, peak_tflops

# above this, N processes beat N x one process: one of the two runs was slowed
MAX_SCALING_EFFICIENCY = 1.05
# a step cannot use more than all of the peak it is measured against
MAX_MFU = 1.0
MAX_PCT_OF_PEAK = 100.0
# A timed region lasts at least a nanosecond (no clock resolves less, no device op is shorter) and
# under 10^6 s (11.6 days): the bound of every duration a row or a machine's history holds.
SHORTEST_TIMED_S, LONGEST_TIMED_S = 1e-9, 1e6


@dataclass(frozen=True)
class Bound:
    """A figure's column, the most it can be, what a value past it says (a template of `value` and
    `limit`), and the likely cause, for the reader."""

    column: str
    limit: float
    says: str
    cause: str

    def reason(self, value: float) -> str:
        return f"{IMPOSSIBLE}: {self.says.format(value=value, limit=self.limit)} — {self.cause}"


MISSED_WORK = "the timing missed device work"
# a scaling baseline or a matmul reference measured while another job slowed it inflates the figure
# set against it
FIXED: tuple[Bound, ...] = (
    Bound(
        "scaling_efficiency",
        MAX_SCALING_EFFICIENCY,
        "scaling efficiency {value:.2f} > {limit:g}",
        "another job shared the machine during one of the runs",
    ),
    Bound(
        "mfu",
        MAX_MFU,
        "MFU {value:.0%} is above the whole peak",
        f"{MISSED_WORK}, or the measured matmul reference was slowed by another job",
    ),
)


def bounds_for(device_name: str, dtype: str, memory_tier: str | None = None) -> tuple[Bound, ...]:
    """The bounds of a row of this device and number format; a figure of an unknown device's peak
    has none. A working set the row calls cache-resident may beat the memory's peak. The row's own %
    of peak is bounded only where the peaks table knows no peak (an older row): else the figure
    itself is."""
    out = list(FIXED)
    tflops, gbps = peak_tflops(device_name, dtype), peak_gbps(device_name)
    if tflops:
        out.append(
            Bound(
                "tflops",
                tflops,
                "{value:.1f} TFLOP/s is above the " + dtype + " datasheet peak {limit:.1f}",
                MISSED_WORK,
            )
        )
    else:
        out.append(
            Bound("pct_of_peak", MAX_PCT_OF_PEAK, "{value:.0f}% of the datasheet peak", MISSED_WORK)
        )
    if memory_tier == "cache":
        return tuple(out)
    if gbps:
        out.append(
            Bound(
                "gbps",
                gbps,
                "{value:.0f} GB/s is above the memory datasheet peak {limit:.0f} GB/s",
                "a cache-resident working set or broken timing",
            )
        )
    else:
        out.append(
            Bound(
                "pct_of_peak_gbps",
                MAX_PCT_OF_PEAK,
                "{value:.0f}% of the memory datasheet peak",
                "a cache-resident working set or broken timing",
            )
        )
    return tuple(out)


def past_bounds(figures: Mapping[str, Any], device_name: str, dtype: str) -> list[str]:
    """Why each figure past its bound is impossible (empty: none is)."""
    reasons = []
    for bound in bounds_for(device_name, dtype, figures.get("memory_tier")):
        value = figures.get(bound.column)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            if value > bound.limit:
                reasons.append(bound.reason(float(value)))
    return reasons
