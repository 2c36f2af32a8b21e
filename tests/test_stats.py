import math
import random
import statistics

import pytest
from pytest_benchmark.stats import Stats

from gpubench.harness.core.stats import median_ci, summarize


def test_summary_of_hand_computed_samples():
    stats = summarize([4.0, 1.0, 3.0, 2.0, 100.0])
    assert stats.rounds == 5
    assert stats.median_s == 3.0
    # pytest-benchmark's method 3 for n=5 (n//4 = 1, n%4 = 1): q1 = 0.25*1 + 0.75*2, q3 = 0.75*4 +
    # 0.25*100
    assert stats.q1_s == 1.75 and stats.q3_s == 28.0
    assert stats.iqr_s == 26.25
    assert stats.min_s == 1.0 and stats.max_s == 100.0
    assert stats.mean_s == pytest.approx(22.0)
    # sample stdev: sqrt(sum((x - 22)^2) / 4) = sqrt(7610 / 4)
    assert stats.stddev_s == pytest.approx(math.sqrt(7610 / 4))
    assert stats.cv == pytest.approx(stats.stddev_s / 22.0)
    assert stats.rel_iqr == pytest.approx(26.25 / 3.0)


def test_even_count_quartiles_are_the_medians_of_the_halves():
    stats = summarize([1.0, 2.0, 3.0, 10.0])
    assert stats.median_s == 2.5
    assert (stats.q1_s, stats.q3_s) == (1.5, 6.5)


def hand_quartiles(data: list[float]) -> tuple[float, float]:
    """Q1 and Q3 as gpubench computed them before it took pytest-benchmark's Stats: method 3 for odd
    counts, the halves' medians for even ones (the reference the summary must keep equal)."""
    n = len(data)
    if n == 1:
        return data[0], data[0]
    if n % 2:
        k, r = n // 4, n % 4
        if r == 1:
            return 0.25 * data[k - 1] + 0.75 * data[k], 0.75 * data[3 * k] + 0.25 * data[3 * k + 1]
        return 0.75 * data[k] + 0.25 * data[k + 1], 0.25 * data[3 * k + 1] + 0.75 * data[3 * k + 2]
    return statistics.median(data[: n // 2]), statistics.median(data[n // 2 :])


def odd_samples(kind: str, n: int) -> list[float]:
    rng = random.Random(n)
    return {
        "lognormal": lambda: [rng.lognormvariate(-7, 0.3) for _ in range(n)],
        "outlier": lambda: [rng.lognormvariate(-7, 0.3) for _ in range(n - 1)] + [0.01],
        "equal": lambda: [1e-3] * n,
        "two values": lambda: [1e-3 if i % 3 else 2e-3 for i in range(n)],
        "ties": lambda: [rng.choice([1e-9, 5e-4, 5e-4, 7.0]) for _ in range(n)],
        "zeros and huge": lambda: [rng.choice([0.0, 1e6, 3e-9]) for _ in range(n)],
        "descending": lambda: sorted((rng.random() for _ in range(n)), reverse=True),
    }[kind]()


@pytest.mark.parametrize(
    "kind", ["lognormal", "outlier", "equal", "two values", "ties", "zeros and huge", "descending"]
)
def test_the_summary_equals_the_hand_quartiles_and_pytest_benchmarks_table(kind):
    """The CSV's figures are pytest-benchmark's Stats (what its table shows), and equal, to the last
    bit, the quartiles, IQR and outlier counts gpubench computed by hand before, for every count
    from 1 to 59."""
    for n in range(1, 60):
        samples = odd_samples(kind, n)
        ours, data = summarize(samples), sorted(samples)
        q1, q3 = hand_quartiles(data)
        fence, mean = 1.5 * (q3 - q1), statistics.fmean(data)
        stddev = statistics.stdev(data) if n > 1 else 0.0
        assert (ours.rounds, ours.median_s, ours.min_s, ours.max_s) == (
            n,
            statistics.median(data),
            data[0],
            data[-1],
        )
        assert (ours.q1_s, ours.q3_s, ours.iqr_s, ours.stddev_s) == (q1, q3, q3 - q1, stddev), (
            kind,
            n,
        )
        # fmean then, statistics.mean now: one ulp
        assert ours.mean_s == pytest.approx(mean, rel=1e-15, abs=0)
        assert ours.iqr_outliers == sum(s < q1 - fence or s > q3 + fence for s in data), (kind, n)
        assert ours.stddev_outliers == sum(s < mean - stddev or s > mean + stddev for s in data), (
            kind,
            n,
        )
        theirs = Stats()
        for s in samples:
            theirs.update(s)
        assert f"{ours.stddev_outliers};{ours.iqr_outliers}" == theirs.outliers
        assert isinstance(ours.mean_s, float) and isinstance(ours.stddev_s, float)


def test_fixed_sample_matches_the_measured_discrepancy_case():
    """Nine rounds of a short case (fp32 matmul n=64 has this shape): linear quartiles would give an
    IQR 33% below pytest-benchmark's; its method 3, q = 1, is used."""
    samples = [10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 40.0]
    stats = summarize(samples)
    assert (stats.q1_s, stats.q3_s) == (0.25 * 11 + 0.75 * 12, 0.75 * 16 + 0.25 * 17)
    assert stats.iqr_outliers == 1


def test_single_sample_has_zero_spread():
    stats = summarize([0.5])
    assert (stats.median_s, stats.iqr_s, stats.stddev_s, stats.cv, stats.rel_iqr) == (
        0.5,
        0.0,
        0.0,
        0.0,
        0.0,
    )


@pytest.mark.parametrize("bad", [[], [1.0, -0.001], [float("nan")]])
def test_impossible_samples_are_refused(bad):
    with pytest.raises(ValueError):
        summarize(bad)


def test_median_ci_is_the_sign_tests_order_statistics():
    """[x_(k), x_(n+1-k)], k the largest with P(Binomial(n, 1/2) < k) <= 0.5%: for 41 values
    x_12..x_30."""
    values = list(range(1, 42))
    assert median_ci(values, 0.99) == (12, 30)
    below = lambda k, n: sum(math.comb(n, j) for j in range(k)) / 2**n  # noqa: E731
    assert below(12, 41) <= 0.005 < below(13, 41)
    # too few for 99%: the whole range
    assert median_ci([3.0, 1.0, 2.0], 0.99) == (1.0, 3.0)
    assert median_ci([5.0], 0.99) == (5.0, 5.0)
    with pytest.raises(ValueError):
        median_ci([], 0.99)


def test_median_ci_covers_the_median_as_often_as_it_says():
    rng = random.Random(7)
    trials, n = 2000, 41
    covered = sum(
        low <= 0.0 <= high
        for low, high in (
            median_ci([rng.gauss(0, 1) for _ in range(n)], 0.95) for _ in range(trials)
        )
    )
    # exact coverage for 41 values at k=14: 0.972
    assert 0.94 <= covered / trials <= 0.99
