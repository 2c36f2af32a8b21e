"""Each case's share of the run's time (no torch): what a case costs, shares water-filled by cost (a
small known cost gets that cost, the rest split equally) and recomputed before every case, so time a
case leaves goes to the next; the typed over-budget outcome a row carries."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gpubench.harness.core.flags import LEFT_OUT_FLAG, OVER_BUDGET_FLAG
from gpubench.harness.core.duration_text import format_duration
from gpubench.harness.core.plan import RoundPlan

# A known cost is granted this much above its last time: a case 10% slower than its history must not
# lose rounds.
COST_MARGIN = 1.25
# A share below this cannot build a case and time one call: skipped at once, so many small starts
# cannot overrun.
MIN_SHARE_S = 0.2


@dataclass(frozen=True)
class CaseCost:
    """A case's build and first-call seconds (None: no call made): from this run's first build; with
    `history`, from this machine's earlier runs (they order and cap shares, never skip a case before
    a call of its own in this run); with `predicted`, from the cost model. `model_call_s`: the cost
    model's first call of a case history prices, kept where history says one call cannot fit (the
    model, for this run, may still skip it unbuilt)."""

    build_s: float
    first_call_s: float | None = None
    predicted: bool = False
    history: bool = False
    model_call_s: float | None = None


def water_level(costs: list[float | None], left_s: float) -> float:
    """The level with sum(min(cost, level)) == left_s (an unknown None cost gets it); inf when every
    cost fits."""
    ordered = sorted(math.inf if cost is None else cost * COST_MARGIN for cost in costs)
    remaining_s, count = max(0.0, left_s), len(ordered)
    for cost in ordered:
        if cost * count <= remaining_s:
            remaining_s, count = remaining_s - cost, count - 1
        else:
            return remaining_s / count
    return math.inf


def share_of(cost: float | None, others: list[float | None], left_s: float) -> float:
    """One case's share of `left_s` beside `others`; when every known cost fits, costs are scaled up
    to fill it."""
    costs = [cost, *others]
    level = water_level(costs, left_s)
    if math.isinf(level):
        total_s = sum(c * COST_MARGIN for c in costs if c is not None)
        return left_s * (cost * COST_MARGIN) / total_s if cost and total_s > 0 else left_s
    return level if cost is None else min(cost * COST_MARGIN, level)


@dataclass
class CaseShare:
    """One build of one case under a run budget: `share_s` seconds from `started_s` (on `now`)."""

    share_s: float
    budget_s: float
    # its first call as priced before the build (this run, the model), checked then
    known_call_s: float | None = None
    # the cost model's, where no history of the case exists
    predicted_build_s: float | None = None
    # what the plan expects the build to cost (history, else the model)
    expected_build_s: float | None = None
    # how a known first call was priced, said when it refuses the case
    priced_as: str = ""
    # why the plan left this case out before it was built (its first line said so): it is not built
    # at all
    left_out: str = ""
    now: Callable[[], float] = time.monotonic
    started_s: float = field(default=0.0)

    def __post_init__(self) -> None:
        self.started_s = self.started_s or self.now()

    def left_s(self) -> float:
        return self.share_s - (self.now() - self.started_s)

    def too_small(self) -> str | None:
        """Why no case fits in this share at all, or None."""
        if self.share_s >= min(MIN_SHARE_S, self.expected_build_s or math.inf):
            return None
        share = format_duration(max(self.share_s, 0.0))
        return (
            f"over budget: its share of the {format_duration(self.budget_s)} budget is {share}, "
            "too little to build it and time one call — raise --budget or deselect cases"
        )

    def over(self, call_s: float) -> str:
        """Why a case whose one call takes `call_s` is not measured, naming the fix."""
        budget, share = format_duration(self.budget_s), format_duration(self.share_s)
        if call_s <= self.share_s:
            spent = format_duration(self.now() - self.started_s)
            return (
                f"over budget: one call takes {format_duration(call_s)} and {spent} of its "
                f"{share} share of the {budget} budget went to building and warming it up: no "
                "timed call fits — raise --budget or deselect it"
            )
        # the price is named only where it decided: a call measured in this build speaks for itself
        priced = f" ({self.priced_as})" if self.priced_as and call_s == self.known_call_s else ""
        return (
            f"over budget: one call takes {format_duration(call_s)}{priced}; its share of the "
            f"{budget} budget is {share} — raise --budget or deselect it"
        )


class OverBudget(Exception):
    """A case skipped because one call does not fit its share, or left out by the plan; `columns`
    and `flags` go into its row."""

    def __init__(self, reason: str, first_call_s: float | None, left_out: bool = False) -> None:
        super().__init__(reason)
        self.columns = {"first_call_s": first_call_s}
        self.flags = (OVER_BUDGET_FLAG, LEFT_OUT_FLAG) if left_out else (OVER_BUDGET_FLAG,)


def capped_plan(plan: RoundPlan, left_s: float) -> RoundPlan:
    """The rounds of `plan` that fit in `left_s` (at least 1: the caller checked one round fits)."""
    round_s = max(plan.estimate_s, 1e-9) * plan.iterations
    fit = max(1, int(left_s // round_s))
    return (
        plan
        if fit >= plan.rounds
        else RoundPlan(plan.warmup_calls, plan.iterations, fit, plan.estimate_s)
    )
