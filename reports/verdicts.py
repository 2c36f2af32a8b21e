"""What a comparison says about one case (or about every case at once): the ratio, its interval,
and a verdict — shared by unpaired runs (reports.compare, reports.replicates) and paired sessions
(reports.paired). Torch-free."""

from __future__ import annotations

import math
from dataclasses import dataclass

ALPHA = 0.01
NOISE_FLOOR = 0.04  # relative between-run noise of identical runs on shared machines (measured 2–10%)
ONE_PROCESS_FLOOR = 0.08  # the same for a case measured in one process per run (an epoch, a DDP launch)
MACHINE_WIDE = "(every case: machine-wide shift)"  # the line that judges every case at once
VERDICTS = ("slower", "faster", "no change", "inconclusive", "broken", "not judged")


@dataclass(frozen=True)
class Verdict:
    case_id: str
    base_median_s: float
    new_median_s: float
    ratio: float  # new / base: above 1 is slower
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    detectable: float | None  # smallest relative change this comparison could detect
    verdict: str  # slower | faster | no change | inconclusive | broken
    note: str = ""


def band_verdict(p_value: float, ratio: float, low: float, high: float, threshold: float) -> str:
    """slower / faster: significant and beyond the threshold; no change: the whole interval lies
    within ± threshold; inconclusive otherwise (more runs or pairs would tell)."""
    band = (1 / (1 + threshold), 1 + threshold)
    if p_value < ALPHA and ratio > band[1]:
        return "slower"
    if p_value < ALPHA and ratio < band[0]:
        return "faster"
    if band[0] <= low and high <= band[1]:
        return "no change"
    return "inconclusive"


MAX_LOG = 700.0  # e^700 is 1e304: a ratio or interval bound beyond it is shown as inf, never an OverflowError


def exp_capped(log_value: float) -> float:
    """math.exp that never overflows: a comparison of far-apart figures gives inf, not a traceback
    (whose exit 1 would read as "slower")."""
    return math.exp(log_value) if log_value < MAX_LOG else math.inf
