import math

import pytest

from harness.stats import quantile, summarize


def test_summary_of_hand_computed_samples():
    stats = summarize([4.0, 1.0, 3.0, 2.0, 100.0])
    assert stats.rounds == 5
    assert stats.median_s == 3.0
    # linear quantiles of [1, 2, 3, 4, 100]: q1 = 2, q3 = 4
    assert stats.iqr_s == 2.0
    assert stats.min_s == 1.0 and stats.max_s == 100.0
    assert stats.mean_s == pytest.approx(22.0)
    # sample stdev: sqrt(sum((x - 22)^2) / 4) = sqrt(7610 / 4)
    assert stats.stddev_s == pytest.approx(math.sqrt(7610 / 4))
    assert stats.cv == pytest.approx(stats.stddev_s / 22.0)


def test_even_count_median_interpolates():
    assert summarize([1.0, 2.0, 3.0, 10.0]).median_s == 2.5
    assert quantile([0.0, 10.0], 0.25) == 2.5


def test_single_sample_has_zero_spread():
    stats = summarize([0.5])
    assert (stats.median_s, stats.iqr_s, stats.stddev_s, stats.cv) == (0.5, 0.0, 0.0, 0.0)


@pytest.mark.parametrize("bad", [[], [1.0, -0.001], [float("nan")]])
def test_impossible_samples_are_refused(bad):
    with pytest.raises(ValueError):
        summarize(bad)
