"""What a comparison says about one case (or every case at once). Every estimator (compare,
replicates, paired, sequential) returns an `Estimate`; `decide` is the one rule that turns it into a
`Judgement`, `exit_code_of` the one that turns judgements into the exit code; a `Verdict` is what is
shown."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

# Student's t CDF and quantile: scipy.stats.t's, without its import and per-call cost
from scipy.special import stdtr, stdtrit

from gpubench.harness.core.exits import ExitCode
from gpubench.harness.core.exits import UsageError

ALPHA = 0.01
# relative between-run noise of identical runs on shared machines (measured 2–10%)
NOISE_FLOOR = 0.04
# the same for a case measured in one process per run (an epoch, a DDP launch)
ONE_PROCESS_FLOOR = 0.08
# the line that judges every case at once
MACHINE_WIDE = "(every case: machine-wide shift)"


class Judgement(str, Enum):
    """What a comparison calls a case; its value is the word shown (a str, so tables and JSON print
    it)."""

    SLOWER = "slower"
    FASTER = "faster"
    NO_CHANGE = "no change"
    INCONCLUSIVE = "inconclusive"
    # ok in the base; failed, skipped or held back by its run budget in the new side
    BROKEN = "broken"
    # the machine-wide line when cases are judged one by one
    NOT_JUDGED = "not judged"
    # significant in the direction a busy side alone could make it (reports/judge/busy.py): the
    # load's, or the code's?
    CANNOT_JUDGE = "cannot judge: busy"
    # a DRAM case whose sides read the memory's two modes (reports/judge/modes.py): the mode's, not
    # the code's
    TWO_MODES = "cannot judge: two modes"

    def __str__(self) -> str:
        return self.value

    # Python 3.12 formats a str mixin as 'Judgement.SLOWER'
    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


# what fails a gate
FAILS = (Judgement.SLOWER, Judgement.BROKEN)


@dataclass(frozen=True)
class Verdict:
    case_id: str
    base_median_s: float
    new_median_s: float
    # new / base: above 1 is slower
    ratio: float
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    # smallest relative change this comparison could detect
    detectable: float | None
    verdict: Judgement
    note: str = ""

    @classmethod
    def of(
        cls,
        case_id: str,
        medians: tuple[float, float],
        estimate: Estimate,
        verdict: Judgement,
        note: str,
    ) -> Verdict:
        return cls(
            case_id,
            *medians,
            estimate.ratio,
            estimate.low,
            estimate.high,
            estimate.p_value,
            estimate.detectable,
            verdict,
            note,
        )


@dataclass(frozen=True)
class Estimate:
    """new / base for one case: the ratio, its interval at 1 - ALPHA, the p-value of "no change" and
    the smallest relative change the comparison could detect."""

    ratio: float
    low: float
    high: float
    p_value: float
    detectable: float


def t_estimate(mean_log: float, se: float, dof: float) -> Estimate:
    """A t statistic on the log scale: ratio e^mean, interval mean ± t*·se, two-sided p."""
    t_crit = float(stdtrit(dof, 1 - ALPHA / 2))
    p_value = float(2 * stdtr(dof, -abs(mean_log) / se)) if se > 0 else (0.0 if mean_log else 1.0)
    return Estimate(
        exp_capped(mean_log),
        exp_capped(mean_log - t_crit * se),
        exp_capped(mean_log + t_crit * se),
        p_value,
        exp_capped(t_crit * se) - 1,
    )


def decide(estimate: Estimate, threshold: float) -> Judgement:
    """The one rule. slower / faster: significant and beyond the threshold; no change: the whole
    interval lies within ± threshold; inconclusive otherwise (more runs or pairs would tell)."""
    band = (1 / (1 + threshold), 1 + threshold)
    if estimate.p_value < ALPHA and estimate.ratio > band[1]:
        return Judgement.SLOWER
    if estimate.p_value < ALPHA and estimate.ratio < band[0]:
        return Judgement.FASTER
    if band[0] <= estimate.low and estimate.high <= band[1]:
        return Judgement.NO_CHANGE
    return Judgement.INCONCLUSIVE


def exit_code_of(verdicts: Iterable[Verdict]) -> ExitCode:
    """FAILED when a case is slower or broken; else CANNOT_JUDGE when busy rows alone could have
    made a difference seen (never the exit of a clean pass); else OK."""
    judged = {v.verdict for v in verdicts}
    if judged & set(FAILS):
        return ExitCode.FAILED
    cannot = {Judgement.CANNOT_JUDGE, Judgement.TWO_MODES}
    return ExitCode.CANNOT_JUDGE if cannot & judged else ExitCode.OK


def tally(verdicts: Iterable[Verdict]) -> str:
    """'1 slower, 0 faster, ...' over every judgement a line can have; 'cannot judge: busy' only
    where one is."""
    judged = [v.verdict for v in verdicts]
    shown = [
        k
        for k in Judgement
        if k != Judgement.NOT_JUDGED
        and (k not in (Judgement.CANNOT_JUDGE, Judgement.TWO_MODES) or k in judged)
    ]
    return ", ".join(f"{judged.count(k)} {k}" for k in shown)


# e^700 is 1e304: a ratio or interval bound beyond it is shown as inf
MAX_LOG = 700.0


def exp_capped(log_value: float) -> float:
    """math.exp that gives inf, not an OverflowError (whose exit 1 would read as "slower")."""
    return math.exp(log_value) if log_value < MAX_LOG else math.inf


# 0.1%: no run resolves a smaller change
MIN_THRESHOLD = 0.001


def parse_threshold(text: str) -> float:
    """'5%' or '0.05' -> 0.05. A bare number of 1 or more is ambiguous (5 = 500%?) and refused."""
    try:
        value = float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        raise UsageError(f"bad --threshold {text!r}: use a percentage such as 5%") from None
    if not math.isfinite(value) or not MIN_THRESHOLD <= value < 10:
        raise UsageError(
            f"bad --threshold {text!r}: use a percentage from 0.1% to below 1000%, such as 5%"
        )
    if not text.endswith("%") and value >= 1:
        raise UsageError(
            f"bad --threshold {text!r}: write {text}% for a percentage "
            "(or a fraction below 1, such as 0.05)"
        )
    return value
