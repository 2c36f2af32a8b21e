"""The noise line of `gpubench run` and `gpubench ab`: what the judge found of builds that disagree
(gpubench.reports.judge.noise), in one line: what was seen, the cost, the knob."""

from __future__ import annotations

import math

import pandas as pd

from gpubench.reports.judge.noise import Noise, Readings, judge_noise


def noise_line(
    frame: pd.DataFrame,
    readings: Readings,
    detectable: float | None = None,
    group: tuple[str, ...] = ("case_id",),
) -> str | None:
    """The one line, or None when the builds agree as well as their samples allow (judge_noise's
    arguments)."""
    noise = judge_noise(frame, readings, detectable, group)
    return None if noise is None else said(noise)


def said(noise: Noise) -> str:
    """What the judge found, as one line."""
    detectable, quiet, spread = noise.detectable, noise.quiet, noise.spread
    if not math.isfinite(detectable):
        cost = "no change detectable"
    elif quiet < detectable:
        cost = f"detectable change {detectable:.0%} instead of ~{quiet:.0%}"
    # each build's own rounds spread as wide: more builds alone will not narrow it
    else:
        cost = f"detectable change {detectable:.0%}, each build's own samples as wide"
    what = "; ".join(noise.seen) if noise.seen else "no busy process, steal or thread excess seen"
    return (
        f"noise: builds of a case disagree {spread.factor:.1f}x what their own samples explain "
        f"({math.expm1(spread.observed_log_sd):.1%} vs ~{math.expm1(spread.expected_log_sd):.1%}, "
        f"median of {spread.cases} {noise.unit}); seen: {what}; {cost}; try "
        f"{' or '.join(noise.knobs)}"
    )
