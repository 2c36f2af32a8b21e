"""Pure statistics over raw per-round samples (seconds). No torch, no I/O."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class SampleStats:
    """Summary of one case's raw samples; every field is derived, never measured directly."""

    rounds: int
    median_s: float
    iqr_s: float
    min_s: float
    max_s: float
    mean_s: float
    stddev_s: float

    @property
    def cv(self) -> float:
        """Coefficient of variation (stddev / mean); 0 for a single sample."""
        return self.stddev_s / self.mean_s if self.mean_s > 0 else 0.0


def quantile(sorted_samples: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default 'linear' method) of sorted data."""
    if not sorted_samples:
        raise ValueError("quantile of no samples")
    pos = (len(sorted_samples) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    frac = pos - lo
    return sorted_samples[lo] * (1 - frac) + sorted_samples[hi] * frac


def summarize(samples_s: Sequence[float]) -> SampleStats:
    """Median, IQR, min, max, mean and sample stddev of raw samples.

    Raises ValueError for no samples or a negative sample: a negative duration means the clock
    or the sync is broken, and no statistic over it is worth publishing.
    """
    if not samples_s:
        raise ValueError("no samples to summarize")
    if any(s < 0 or math.isnan(s) for s in samples_s):
        raise ValueError(f"impossible sample (negative or NaN duration): {min(samples_s)!r}")
    data = sorted(samples_s)
    return SampleStats(
        rounds=len(data),
        median_s=quantile(data, 0.5),
        iqr_s=quantile(data, 0.75) - quantile(data, 0.25),
        min_s=data[0],
        max_s=data[-1],
        mean_s=statistics.fmean(data),
        stddev_s=statistics.stdev(data) if len(data) > 1 else 0.0,
    )
