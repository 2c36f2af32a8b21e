"""Pure statistics over raw per-round samples (seconds). The summary is pytest-benchmark's own
`Stats`, so the CSV and its terminal table never disagree (tests/test_stats.py pins this)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Sequence

from pytest_benchmark.stats import Stats

# A figure whose 95% interval, from its rounds, reaches past this share of it either side is
# "noisy". The interval is the median's (its standard error from the rounds' IQR, so one outlier
# round does not flag it): the spread of the rounds alone flagged 45% of a quiet 2-core run's rows
# whose medians, over 50 rounds, were known to within 1%.
NOISY_REL_CI95 = 0.05
# sd of a sample median / sd of the samples, for a normal spread: sqrt(pi / 2)
MEDIAN_SE_FACTOR = 1.2533
# interquartile range of a normal spread, in standard deviations
IQR_PER_SD = 1.349
Z95 = 1.96


@dataclass(frozen=True)
class SampleStats:
    rounds: int
    median_s: float
    q1_s: float
    q3_s: float
    min_s: float
    max_s: float
    mean_s: float
    stddev_s: float
    # beyond 1.5 IQR from the quartiles (Tukey)
    iqr_outliers: int
    # beyond one stddev from the mean
    stddev_outliers: int

    @property
    def iqr_s(self) -> float:
        return self.q3_s - self.q1_s

    @property
    def cv(self) -> float:
        """Coefficient of variation (stddev / mean); 0 for a single sample."""
        return self.stddev_s / self.mean_s if self.mean_s > 0 else 0.0

    @property
    def rel_iqr(self) -> float:
        """IQR / median: the rounds' dispersion (robust to a lone outlier)."""
        return self.iqr_s / self.median_s if self.median_s > 0 else 0.0

    @property
    def rel_ci95(self) -> float:
        """Half the median's 95% interval over the median, from the rounds' IQR: how far the figure
        may be off."""
        return (
            Z95 * MEDIAN_SE_FACTOR * self.rel_iqr / IQR_PER_SD / math.sqrt(self.rounds)
            if self.rounds
            else 0.0
        )


def summarize(samples_s: Sequence[float]) -> SampleStats:
    """ValueError for no samples or a negative one: that means a broken clock or sync, not worth
    publishing."""
    if not samples_s:
        raise ValueError("no samples to summarize")
    if any(s < 0 or math.isnan(s) for s in samples_s):
        raise ValueError(f"impossible sample (negative or NaN duration): {min(samples_s)!r}")
    theirs = Stats()
    for sample_s in samples_s:
        theirs.update(sample_s)
    return SampleStats(
        theirs.rounds,
        theirs.median,
        theirs.q1,
        theirs.q3,
        theirs.min,
        theirs.max,
        float(theirs.mean),
        float(theirs.stddev),
        theirs.iqr_outliers,
        theirs.stddev_outliers,
    )


def median_ci(values: Sequence[float], confidence: float = 0.99) -> tuple[float, float]:
    """The sign test's distribution-free interval of the median: x_(k), x_(n+1-k), k the largest
    with P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2; (min, max) when too few values."""
    if not values:
        raise ValueError("no values for a confidence interval")
    data, n = sorted(values), len(values)
    tail = (1 - confidence) / 2
    # below[k] = P(B < k)
    below = [0.0]
    for j in range(n):
        below.append(below[-1] + math.comb(n, j) / 2**n)
    k = 1
    while k + 1 <= (n + 1) // 2 and below[k + 1] <= tail:
        k += 1
    return data[k - 1], data[n - k]
