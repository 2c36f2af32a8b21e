"""Round planning, pure (no torch): how many calls per round and how many rounds fill one build's
timed seconds."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class RoundPlan:
    """How to sample one case: `iterations` calls per timed round, `rounds` rounds."""

    warmup_calls: int
    iterations: int
    rounds: int
    # seconds per call seen during warm-up
    estimate_s: float


@dataclass(frozen=True)
class BuildTiming:
    """How one build of a case is timed (not the run's --budget, which is the whole run's time); the
    profiles differ only in these numbers."""

    # total timed seconds per build
    target_s: float = 1.0
    # a round shorter than this is dominated by sync/launch overhead
    min_round_s: float = 1e-3
    min_rounds: int = 5
    max_rounds: int = 200
    warmup_calls: int = 3
    # timed calls per build, at least: a slow call's build is >= min_calls calls, not min_rounds
    min_calls: int = 1


# --build-calls: beyond it a build of a slow case would take minutes
MAX_BUILD_CALLS = 1000

# Planned rounds aim this much above the minimum: a call estimated from warm-up can run faster in
# the rounds (caches warm, clocks up), and a round must really last >= min_round_s.
ROUND_MARGIN = 1.5


def plan_rounds(estimate_s: float, timing: BuildTiming) -> RoundPlan:
    """Iterations per round (a round lasts >= min_round_s) and rounds (to fill target_s, and to
    reach min_calls even beyond max_rounds: five 100 ms calls are too few to be steady)."""
    per_call = max(estimate_s, 1e-9)
    iterations = (
        max(1, math.ceil(ROUND_MARGIN * timing.min_round_s / per_call))
        if timing.min_round_s > 0
        else 1
    )
    round_s = per_call * iterations
    rounds = int(min(timing.max_rounds, max(timing.min_rounds, timing.target_s // round_s)))
    rounds = max(rounds, math.ceil(timing.min_calls / iterations))
    return RoundPlan(timing.warmup_calls, iterations, rounds, estimate_s)


@dataclass(frozen=True)
class BuildNoise:
    """A case's builds, log scale: a build median's variance beyond its sampling error
    (`between_var`), one `round_s` round's variance (`round_var`), and a build's seconds outside its
    timed rounds (`overhead_s`)."""

    between_var: float
    round_var: float
    round_s: float
    overhead_s: float


# variance of a sample median / variance of a mean, for a normal spread
MEDIAN_VAR_FACTOR = math.pi / 2
# builds never agree better than 0.2%: no case gets endless builds from a lucky few
MIN_BETWEEN_SD = 0.002


def best_build_s(noise: BuildNoise, least_s: float, most_s: float) -> float:
    """Timed seconds per build leaving the least variance for the time, within [least_s, most_s]:
    variance between_var + a / T times cost overhead_s + T is least at T = sqrt(a · overhead_s /
    between_var) (two-stage sampling: Cochran, Sampling Techniques, 10.6)."""
    # a: the median's variance x timed seconds
    sampling = MEDIAN_VAR_FACTOR * noise.round_var * noise.round_s
    between = max(noise.between_var, MIN_BETWEEN_SD**2)
    best_s = math.sqrt(sampling * max(noise.overhead_s, 0.0) / between) if sampling > 0 else least_s
    return min(most_s, max(least_s, best_s))
