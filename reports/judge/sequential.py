"""The sequential rule of a paired session that stops when it knows (`gpubench ab --budget`): after
every pair each undecided case is looked at again, and a decided case gets no more builds. A
fixed-sample test looked at after every pair would call unchanged code different far more often than
ALPHA; this rule keeps ALPHA however many looks.

The unit is the pair's log-ratio ln(B/A). The evidence against "no change" is the Bayes factor of
the one-sample t-test (prior N(0, MIXTURE_G) on mu/sigma, 1/sigma on sigma), a function of t alone
and a nonnegative martingale under mu = 0, so by Ville's inequality P(BF_n >= 1/alpha for some n) <=
alpha (Perez-Ortiz, Lardy, de Heide, Grunwald: "E-statistics, group invariance and anytime-valid
testing"; the "safe t-test"). The always-valid p-value is min over k <= n of 1/BF_k; the confidence
sequence is mean +- t*_n s/sqrt(n), t*_n the |t| where BF_n reaches 1/alpha (infinite with few
pairs). Across cases the p-values are adjusted together (Benjamini-Hochberg); a p-value only falls
as pairs come, so a case once called slower or faster stays so. tests/test_power.py measures the
false-alarm rate and power on simulated sessions (tests/sequential_simulation.py). Numpy, vectorised
over leading axes (sessions, cases)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gpubench.reports.judge.verdicts import ALPHA

# Prior variance of mu/sigma. A larger g decides large changes a pair sooner and calls unchanged
# cases "no change" later (tried 0.25 to 10 on tests/test_power.py's simulation); with 1 a case can
# be decided from 7 pairs on.
MIXTURE_G = 1.0
# no look before three pairs: a t-statistic of two pairs has one degree of freedom
MIN_PAIRS = 3


def log_bayes_factor(t: np.ndarray, n: np.ndarray | int, g: float = MIXTURE_G) -> np.ndarray:
    """ln BF_n of the t-statistic `t` after `n` pairs (n >= 2), elementwise."""
    n = np.asarray(n, float)
    nu, r = n - 1, 1 + n * g
    t2 = np.asarray(t, float) ** 2
    return -0.5 * np.log(r) + (nu + 1) / 2 * (np.log1p(t2 / nu) - np.log1p(t2 / (nu * r)))


def boundary_t(n: np.ndarray | int, level: float = ALPHA, g: float = MIXTURE_G) -> np.ndarray:
    """|t| at which BF_n reaches 1/level; inf where no t reaches it (too few pairs)."""
    n = np.asarray(n, float)
    nu, r = n - 1, 1 + n * g
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        # (1 + u) / (1 + u/r) = k, u = t^2/nu
        k = np.exp((0.5 * np.log(r) - math.log(level)) * 2 / (nu + 1))
        u = (k - 1) / (1 - k / r)
        return np.where((k < r) & (nu > 0), np.sqrt(nu * u), np.inf)


@dataclass(frozen=True)
class Prefixes:
    """After 1, 2, ... pairs (last axis): the mean log-ratio, the confidence sequence's half-width
    at ALPHA, and the always-valid p-value."""

    mean: np.ndarray
    half_width: np.ndarray
    p_value: np.ndarray


def prefixes(logs: np.ndarray, g: float = MIXTURE_G) -> Prefixes:
    """The sequential statistics after each pair of `logs` (pairs on the last axis)."""
    x = np.asarray(logs, float)
    n = np.arange(1, x.shape[-1] + 1, dtype=float)
    mean = np.cumsum(x, axis=-1) / n
    with np.errstate(divide="ignore", invalid="ignore"):
        var = np.maximum(np.cumsum(x * x, axis=-1) - n * mean * mean, 0.0) / (n - 1)
        se = np.sqrt(var / n)
        t = np.where(se > 0, mean / se, np.where(mean == 0, 0.0, np.inf))
        log_bf = np.where(
            n >= 2, log_bayes_factor(np.where(np.isfinite(t), t, 0.0), np.maximum(n, 2), g), 0.0
        )
    # identical nonzero pairs: a zero spread
    log_bf = np.where(np.isinf(t) & (n >= 2), np.inf, log_bf)
    log_bf = np.where(n >= MIN_PAIRS, log_bf, 0.0)
    p_value = np.minimum(1.0, np.exp(-np.maximum.accumulate(log_bf, axis=-1)))
    half_width = np.where(n >= MIN_PAIRS, boundary_t(np.maximum(n, 2), ALPHA, g) * se, np.inf)
    return Prefixes(mean, np.where(np.isnan(half_width), np.inf, half_width), p_value)


def bh_adjust(p_values: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (scipy's), NaN left out."""
    # scipy.stats costs half a second: only a judged session pays it
    from scipy.stats import false_discovery_control

    p = np.asarray(p_values, float)
    adjusted, kept = np.full_like(p, np.nan), ~np.isnan(p)
    adjusted[kept] = false_discovery_control(p[kept])
    return adjusted


def first_decidable_pairs() -> int:
    """The fewest pairs after which the confidence sequence is finite: no verdict can come
    sooner."""
    n = np.arange(MIN_PAIRS, 1000)
    return int(n[np.isfinite(boundary_t(n))][0])


def detectable(half_width: float) -> float:
    """The smallest relative change the confidence sequence could tell from none, as a fraction."""
    return math.expm1(half_width) if half_width < 700 else math.inf
