"""Sessions played by the sequential rule of `gpubench ab --budget`
(gpubench.reports.judge.sequential) on simulated pair log-ratios, vectorised over sessions and
cases: what tests/test_power.py and tests/test_ab_lengths.py measure the false-alarm rate and
power with. test_power holds its verdicts equal to the session's own (paired.judge_session,
sequential=True)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import false_discovery_control

from gpubench.reports.judge.sequential import MIN_PAIRS, MIXTURE_G, prefixes
from gpubench.reports.judge.verdicts import ALPHA, Judgement

SLOWER, FASTER, NO_CHANGE, INCONCLUSIVE = 0, 1, 2, 3
# by code
WORDS = (Judgement.SLOWER, Judgement.FASTER, Judgement.NO_CHANGE, Judgement.INCONCLUSIVE)


def verdict_codes(
    mean: np.ndarray, half_width: np.ndarray, p_adjusted: np.ndarray, threshold: float
) -> np.ndarray:
    """verdicts.decide's rule per element on log scale (test_power holds the two equal)."""
    band = math.log1p(threshold)
    significant = p_adjusted < ALPHA
    codes = np.where(
        np.abs(mean) + half_width <= band, NO_CHANGE, np.full(np.shape(mean), INCONCLUSIVE)
    )
    codes = np.where(significant & (mean < -band), FASTER, codes)
    return np.where(significant & (mean > band), SLOWER, codes)


@dataclass(frozen=True)
class Simulated:
    """Sessions run by the sequential rule: each case's final verdict code and pairs (sessions x
    cases)."""

    codes: np.ndarray
    pairs: np.ndarray


def masked_median(values: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The median of each row's values where `mask` holds, and how many there were (last axis)."""
    count = mask.sum(axis=-1)
    ordered = np.sort(np.where(mask, values, np.inf), axis=-1)
    low = np.take_along_axis(ordered, np.maximum((count - 1) // 2, 0)[..., None], -1)[..., 0]
    high = np.take_along_axis(ordered, np.maximum(count // 2, 0)[..., None], -1)[..., 0]
    return np.where(count > 0, (low + high) / 2, np.nan), count


def simulate(logs: np.ndarray, threshold: float, g: float = MIXTURE_G) -> Simulated:
    """Plays sessions as `gpubench ab --budget` runs them, without the budget, on `logs` (sessions,
    cases, pairs); the machine-wide line is per pair the median over the 2+ cases that ran in it."""
    sessions, cases, max_pairs = logs.shape
    case_stats = prefixes(logs, g)
    pairs = np.zeros((sessions, cases), int)
    codes = np.full((sessions, cases), INCONCLUSIVE)
    machine = np.zeros((sessions, max_pairs))
    machine_pairs = np.zeros(sessions, int)
    for pair in range(max_pairs):
        running = codes == INCONCLUSIVE
        pairs = np.where(running, pair + 1, pairs)
        shift, count = masked_median(logs[:, :, pair], running)
        machine[:, pair] = np.where(count >= 2, shift, 0.0)
        machine_pairs = np.where(count >= 2, pair + 1, machine_pairs)
        at = (pairs - 1)[..., None]
        mean, half = (
            np.take_along_axis(a, at, -1)[..., 0] for a in (case_stats.mean, case_stats.half_width)
        )
        p_case = np.take_along_axis(case_stats.p_value, at, -1)[..., 0]
        machine_at = np.maximum(machine_pairs - 1, 0)[:, None]
        p_machine = np.take_along_axis(prefixes(machine[:, : pair + 1], g).p_value, machine_at, -1)
        p_machine = np.where(machine_pairs[:, None] >= MIN_PAIRS, p_machine, 1.0)
        adjusted = false_discovery_control(np.concatenate([p_case, p_machine], axis=1), axis=-1)[
            :, :cases
        ]
        codes = verdict_codes(mean, half, adjusted, threshold)
        if not (codes == INCONCLUSIVE).any():
            break
    return Simulated(codes, pairs)
