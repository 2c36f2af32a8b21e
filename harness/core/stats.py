"""Pure statistics over raw per-round samples (seconds). No torch, no I/O.

The quartiles, IQR and outlier counts follow pytest-benchmark's `Stats` exactly (Wikipedia's
quartile methods 3 and 2), so the CSV and pytest-benchmark's terminal table never disagree on the
same samples (tests/test_stats.py pins this against pytest_benchmark.stats.Stats).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from collections.abc import Sequence

# Dispersion above this (IQR / median) makes a figure "noisy". IQR-based, so one outlier round
# does not flag a steady case; outliers are counted apart.
NOISY_REL_IQR = 0.05


@dataclass(frozen=True)
class SampleStats:
    """Summary of one case's raw samples; every field is derived, never measured directly."""

    rounds: int
    median_s: float
    q1_s: float
    q3_s: float
    min_s: float
    max_s: float
    mean_s: float
    stddev_s: float
    iqr_outliers: int  # beyond 1.5 IQR from the quartiles (Tukey)
    stddev_outliers: int  # beyond one stddev from the mean

    @property
    def iqr_s(self) -> float:
        return self.q3_s - self.q1_s

    @property
    def cv(self) -> float:
        """Coefficient of variation (stddev / mean); 0 for a single sample."""
        return self.stddev_s / self.mean_s if self.mean_s > 0 else 0.0

    @property
    def rel_iqr(self) -> float:
        """IQR / median: the dispersion the noise flag uses (robust to a lone outlier)."""
        return self.iqr_s / self.median_s if self.median_s > 0 else 0.0


def quartiles(sorted_samples: Sequence[float]) -> tuple[float, float]:
    """Q1 and Q3 as pytest-benchmark computes them: method 3 for odd counts, the medians of the
    lower and upper halves for even counts."""
    data, n = sorted_samples, len(sorted_samples)
    if n == 1:
        return data[0], data[0]
    if n % 2:
        k, r = n // 4, n % 4
        if r == 1:
            return 0.25 * data[k - 1] + 0.75 * data[k], 0.75 * data[3 * k] + 0.25 * data[3 * k + 1]
        return 0.75 * data[k] + 0.25 * data[k + 1], 0.25 * data[3 * k + 1] + 0.75 * data[3 * k + 2]
    return statistics.median(data[: n // 2]), statistics.median(data[n // 2:])


def summarize(samples_s: Sequence[float]) -> SampleStats:
    """Median, quartiles, min, max, mean, sample stddev and outlier counts of raw samples.

    Raises ValueError for no samples or a negative sample: a negative duration means the clock
    or the sync is broken, and no statistic over it is worth publishing.
    """
    if not samples_s:
        raise ValueError("no samples to summarize")
    if any(s < 0 or math.isnan(s) for s in samples_s):
        raise ValueError(f"impossible sample (negative or NaN duration): {min(samples_s)!r}")
    data = sorted(samples_s)
    q1, q3 = quartiles(data)
    mean = statistics.fmean(data)
    stddev = statistics.stdev(data) if len(data) > 1 else 0.0
    fence = 1.5 * (q3 - q1)
    return SampleStats(
        rounds=len(data),
        median_s=statistics.median(data),
        q1_s=q1,
        q3_s=q3,
        min_s=data[0],
        max_s=data[-1],
        mean_s=mean,
        stddev_s=stddev,
        iqr_outliers=sum(1 for s in data if s < q1 - fence or s > q3 + fence),
        stddev_outliers=sum(1 for s in data if s < mean - stddev or s > mean + stddev),
    )


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def median_ci(values: Sequence[float], confidence: float = 0.99) -> tuple[float, float]:
    """Distribution-free confidence interval of the median: the order statistics x_(k) and x_(n+1-k),
    k the largest with P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2 (the sign test's interval;
    no assumption about the shape of the noise). Too few values for that confidence: (min, max)."""
    if not values:
        raise ValueError("no values for a confidence interval")
    data, n = sorted(values), len(values)
    tail = (1 - confidence) / 2
    below = [0.0]  # below[k] = P(B < k)
    for j in range(n):
        below.append(below[-1] + math.comb(n, j) / 2**n)
    k = 1
    while k + 1 <= (n + 1) // 2 and below[k + 1] <= tail:
        k += 1
    return data[k - 1], data[n - k]
