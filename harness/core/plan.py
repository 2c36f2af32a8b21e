"""Round planning, pure (no torch): how many calls per round and how many rounds fill a budget."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class RoundPlan:
    """How to sample one case: `iterations` calls per timed round, `rounds` rounds."""

    warmup_calls: int
    iterations: int
    rounds: int
    estimate_s: float  # seconds per call seen during warm-up


@dataclass(frozen=True)
class Budget:
    """Time budget per build of a case; the profiles differ only in these numbers."""

    target_s: float = 1.0  # total timed seconds per build
    min_round_s: float = 1e-3  # a round shorter than this is dominated by sync/launch overhead
    min_rounds: int = 5
    max_rounds: int = 200
    warmup_calls: int = 3
    min_calls: int = 1  # timed calls per build, at least: a slow call's build is >= min_calls calls, not min_rounds


MAX_BUILD_CALLS = 1000  # --build-calls: beyond it a build of a slow case would take minutes


# Planned rounds aim this much above the minimum: a call estimated from warm-up can run faster in
# the rounds (caches warm, clocks up), and a round must really last >= min_round_s.
ROUND_MARGIN = 1.5


def plan_rounds(estimate_s: float, budget: Budget) -> RoundPlan:
    """Pick iterations per round (so a round lasts >= min_round_s) and rounds (to fill target_s, and
    to reach min_calls even beyond max_rounds: a build of five 100 ms calls is too few to be steady)."""
    per_call = max(estimate_s, 1e-9)
    iterations = max(1, math.ceil(ROUND_MARGIN * budget.min_round_s / per_call)) if budget.min_round_s > 0 else 1
    round_s = per_call * iterations
    rounds = int(min(budget.max_rounds, max(budget.min_rounds, budget.target_s // round_s)))
    rounds = max(rounds, math.ceil(budget.min_calls / iterations))
    return RoundPlan(budget.warmup_calls, iterations, rounds, estimate_s)
