"""The statistics behind the verdicts, against hand-computed values: paired t with moderated
variance, Benjamini–Hochberg, Welch over replicate runs, and the interval on a machine ratio."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from gpubench.reports.judge.intervals import speedup_interval, steady_best
from gpubench.reports.judge.paired import judge_logs
from gpubench.reports.judge.sequential import bh_adjust
from gpubench.reports.judge.replicates import machine_wide, welch


def test_paired_t_over_log_ratios():
    # B about 10.5% slower in every pair
    logs = np.array([0.10, 0.12, 0.08, 0.10])
    v = judge_logs("c", logs, 0.05)
    se = np.std(logs, ddof=1) / 2
    assert v.ratio == pytest.approx(math.exp(0.10))
    assert v.p_value == pytest.approx(2 * sps.t.sf(0.10 / se, 3))
    assert (
        v.ci_low == pytest.approx(math.exp(0.10 - sps.t.ppf(0.995, 3) * se))
        and v.verdict == "slower"
    )


def test_yuen_trims_one_pair_each_side_and_winsorizes_the_variance():
    # one pair on a busy core
    logs = np.array([0.0, 0.01, -0.01, 0.02, -0.02, 0.005, 0.55, -0.01])
    v = judge_logs("c", logs, 0.05)
    kept = np.sort(logs)[1:-1]
    winsorized = np.clip(logs, np.sort(logs)[1], np.sort(logs)[-2])
    se = math.sqrt(7 * np.var(winsorized, ddof=1) / (6 * 5))
    assert v.ratio == pytest.approx(math.exp(kept.mean())) and v.p_value == pytest.approx(
        2 * sps.t.sf(abs(kept.mean()) / se, 5)
    )
    # the jumped pair neither fakes nor hides a change
    assert v.verdict == "no change" and "2 trimmed" in v.note


def test_benjamini_hochberg_step_up():
    assert bh_adjust([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.02, 0.04, 0.04, 0.02])


def step_up_as_before(p_values: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg as gpubench computed it by hand before it took scipy's, over the last
    axis."""
    p = np.asarray(p_values, float)
    m = np.sum(~np.isnan(p), axis=-1, keepdims=True)
    order = np.argsort(np.where(np.isnan(p), np.inf, p), axis=-1)
    ranked = np.take_along_axis(p, order, axis=-1)
    scaled = np.where(np.isnan(ranked), np.inf, ranked * m / np.arange(1, p.shape[-1] + 1))
    stepped = np.minimum(1.0, np.minimum.accumulate(scaled[..., ::-1], axis=-1)[..., ::-1])
    out = np.empty_like(stepped)
    np.put_along_axis(out, order, stepped, axis=-1)
    return np.where(np.isnan(p), np.nan, out)


@pytest.mark.parametrize("seed", range(40))
def test_benjamini_hochberg_is_as_before_with_nan_left_out(seed):
    rng = np.random.default_rng(seed)
    # mostly small, as p-values of a changed build are
    p = rng.random(int(rng.integers(0, 30))) ** 3
    # ties
    p = np.round(p, 2) if seed % 2 else p
    # a case without a p-value
    p[rng.random(p.size) < 0.2] = np.nan
    assert bh_adjust(p) == pytest.approx(step_up_as_before(p), rel=1e-14, abs=0, nan_ok=True)
    assert (
        bh_adjust(np.full(3, np.nan)) == pytest.approx([np.nan] * 3, nan_ok=True)
        and bh_adjust([]).size == 0
    )


def test_welch_over_runs():
    base, new = np.array([0.0, 0.02, -0.02]), np.array([0.10, 0.12, 0.08])
    v = welch("c", base, new, 0.05, "")
    se = math.sqrt(2 * 0.0004 / 3)
    assert v.ratio == pytest.approx(math.exp(0.1)) and v.p_value == pytest.approx(
        2 * sps.t.sf(0.1 / se, 4)
    )
    assert v.verdict == "slower"


def frame(rows):
    return pd.DataFrame(
        rows, columns=["machine", "run_id", "case_id", "workload", "status", "median_s"]
    )


def test_the_machine_wide_line_compares_run_levels():
    rows = []
    for side, level in (("b", 1.0), ("n", 1.2)):
        for r, jitter in enumerate((1.0, 1.01, 0.99)):
            rows += [
                [side, f"{side}{r}", f"w/c{c}", "w", "ok", level * jitter * (1 + c)]
                for c in range(4)
            ]
    table = frame(rows)
    v = machine_wide(table[table["machine"] == "b"], table[table["machine"] == "n"], 0.05)
    assert v.ratio == pytest.approx(1.2, rel=1e-6) and v.verdict == "slower"


def test_the_speedup_interval_comes_from_the_builds():
    # two cases, two builds each: baseline twice as slow as the machine
    rows = [
        ["base", "r1", "w/a", "w", "ok", 2.0],
        ["base", "r1", "w/a", "w", "ok", 2.2],
        ["mine", "r2", "w/a", "w", "ok", 1.0],
        ["mine", "r2", "w/a", "w", "ok", 1.1],
        ["base", "r1", "w/b", "w", "ok", 4.0],
        ["base", "r1", "w/b", "w", "ok", 4.0],
        ["mine", "r2", "w/b", "w", "ok", 2.0],
        ["mine", "r2", "w/b", "w", "ok", 2.0],
    ]
    interval = speedup_interval(frame(rows), "base", "mine")
    # per case and machine: the builds' variance of the mean log median, plus 4% run-to-run noise
    # for one run both machines' builds spread alike
    var_a = np.var(np.log([2.0, 2.2]), ddof=1) / 2 * 2 + 2 * 0.04**2
    # identical builds: the run-to-run floor alone
    var_b = 2 * 0.04**2
    half = 1.96 * math.sqrt((var_a + var_b) / 4)
    assert (
        interval.geomean == pytest.approx(2.0)
        and interval.cases == 2
        and interval.single_build_cases == 0
    )
    assert interval.low == pytest.approx(2.0 * math.exp(-half)) and interval.high == pytest.approx(
        2.0 * math.exp(half)
    )


def test_a_case_built_once_still_widens_the_interval():
    rows = [["base", "r1", "w/a", "w", "ok", 2.0], ["mine", "r2", "w/a", "w", "ok", 1.0]]
    interval = speedup_interval(frame(rows), "base", "mine")
    # one build, one run per machine: the one-process floor
    half = 1.96 * math.sqrt(2 * 0.08**2)
    assert interval.low == pytest.approx(2.0 * math.exp(-half)) and interval.single_build_cases == 1
    assert "1 built once" in interval.text()


def test_a_noisy_size_cannot_win_the_headline():
    cases = pd.DataFrame(
        {"size": [512, 1024], "tflops": [0.196, 0.191], "tflops_q1": [0.09, 0.185]}
    )
    assert steady_best(cases, "tflops")["size"] == 1024


def test_one_rule_decides_every_estimate():
    """gpubench.reports.judge.verdicts.decide: beyond the band and significant is slower/faster; an
    interval inside the band is no change; an interval that leaves the band without significance is
    inconclusive."""
    from gpubench.reports.judge.verdicts import Estimate, decide

    assert decide(Estimate(1.20, 1.10, 1.30, 0.001, 0.08), 0.05) == "slower"
    assert decide(Estimate(0.80, 0.75, 0.86, 0.001, 0.08), 0.05) == "faster"
    assert decide(Estimate(1.01, 0.98, 1.04, 0.40, 0.03), 0.05) == "no change"
    # detectable within the threshold but the interval reaches past it: not "no change"
    assert decide(Estimate(1.04, 1.00, 1.08, 0.02, 0.04), 0.05) == "inconclusive"
    assert decide(Estimate(1.20, 0.90, 1.60, 0.30, 0.35), 0.05) == "inconclusive"


def test_compare_judges_by_the_one_rule():
    """compare's unpaired estimator goes through decide: x1.04, significant, with an interval
    reaching past +5% is inconclusive (not "no change" because its detectable change is within the
    threshold)."""
    from gpubench.reports.judge.compare import SideUnits, judge

    spread = [0.985, 0.995, 1.0, 1.0, 1.005, 1.015]
    base, new = (
        SideUnits([1.0 * s for s in spread], 1, "builds"),
        SideUnits([1.04 * s for s in spread], 1, "builds"),
    )
    v = judge("c", base, new, 0.05, between2=1e-5)
    assert v.p_value < 0.01 and v.detectable < 0.05 and v.ci_high > 1.05
    assert v.verdict == "inconclusive"
