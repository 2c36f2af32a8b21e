"""A run that fits a time budget (no torch): durations, each case's share of what is left, and over-budget verdicts.
Shares are water-filled (a small known cost gets that cost, the rest split equally) and recomputed before every case,
so time a case leaves goes to the next; code that never returns is cut past the end and a grace (cut_after)."""

from __future__ import annotations

import math
import re
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from collections.abc import Callable, Iterator

from gpubench.harness.core.plan import RoundPlan
from gpubench.harness.core.exits import UsageError

# A known cost is granted this much above its last time: a case 10% slower than its history must not lose rounds.
COST_MARGIN = 1.25
UNITS_S = {"s": 1.0, "m": 60.0, "h": 3600.0}
DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([smh])", re.ASCII)
NO_BUDGET = ("none", "off", "unlimited")
MAX_BUDGET_S = 7 * 24 * 3600.0  # a week: longer is no budget at all, and a timer of 1e300 s overflows
# The least --budget a run accepts: a `gpubench run`'s first build reaches its first case 3-4 s after the run starts on
# a 2-core VM (an interpreter with torch, the collection, the look at the machine, the cost model's probe); at 4 s no
# case got any of it, at 5 s three of four smoke matmuls were measured.
MIN_BUDGET_S = 5.0
# A share below this cannot build a case and time one call: skipped at once, so many small starts cannot overrun.
MIN_SHARE_S = 0.2
# A case still running this long past the budget is cut; the larger of the two, so a short budget's slow last case is
# not cut for a few seconds.
OVERRUN_GRACE_S, OVERRUN_GRACE_FRAC = 30.0, 0.25


class DeadlinePassed(BaseException):
    """User code cut past the budget and its grace. Not an Exception, so the user's `except Exception` cannot
    swallow it."""


@contextmanager
def cut_after(seconds: float, reason: str) -> Iterator[None]:
    """Raises DeadlinePassed(reason) in whatever Python runs `seconds` from now. Only in the main thread with timers,
    and never over another plugin's alarm (pytest-timeout's signal method): there the block runs unbounded."""
    if (not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread()
            or signal.getitimer(signal.ITIMER_REAL)[0] > 0):
        yield
        return

    def cut(signum: int, frame: object) -> None:
        raise DeadlinePassed(reason)

    previous = signal.signal(signal.SIGALRM, cut)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def grace_s(budget_s: float) -> float:
    return max(OVERRUN_GRACE_S, OVERRUN_GRACE_FRAC * budget_s)


def cut_reason(budget_s: float) -> str:
    return (f"did not end within the run's {format_duration(budget_s)} budget and "
            f"{format_duration(grace_s(budget_s))} more: cut (its code, a --model factory or a --tests test, "
            "never returned) — raise --budget if it is only slow")


def parse_duration(text: str | float | None, flag: str = "--budget") -> float | None:
    """Seconds from '90s', '4m', '1.5h', '1h30m'; None for 'none'. A bare number is refused: seconds or minutes?"""
    if text is None or isinstance(text, (int, float)):
        return None if text is None else float(text)
    cleaned = text.strip().lower()
    if cleaned in NO_BUDGET:
        return None
    parts = DURATION_PART.findall(cleaned)
    whole = bool(parts) and "".join(number + unit for number, unit in parts) == cleaned
    units = [UNITS_S[unit] for _, unit in parts]
    whole = whole and units == sorted(set(units), reverse=True)  # 1h30m, not 1h1h (2 h?) nor 30m1h
    seconds = sum(float(number) * UNITS_S[unit] for number, unit in parts) if whole else 0.0
    if not 0 < seconds < math.inf:
        raise UsageError(f"{flag} {text[:40]!r}: use a duration such as 90s, 4m, 1h or 1h30m "
                         "(or none for no limit)")
    if seconds > MAX_BUDGET_S:  # timers and deadlines overflow long before a float does
        raise UsageError(f"{flag} {text[:40]!r}: at most {MAX_BUDGET_S // 3600:.0f}h — use none for no limit")
    return seconds


def parse_budget(text: str | float | None) -> float | None:
    """--budget in seconds (None: no limit); below MIN_BUDGET_S it is one line naming the least accepted."""
    seconds = parse_duration(text)
    if seconds is not None and seconds < MIN_BUDGET_S:
        raise UsageError(f"--budget {str(text)[:40]}: below {format_duration(MIN_BUDGET_S)}, too short for a build to "
                         f"start and build one case — pass --budget {MIN_BUDGET_S:g}s or more (or none for no limit)")
    return seconds


def format_duration(seconds: float) -> str:
    """'25 s', '2.1 s', '3m', '2m31s', '1h05m': short, and whole where it can be."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, rest_s = divmod(round(seconds), 60)
    if minutes >= 60:
        return f"{minutes // 60}h{minutes % 60:02d}m"
    return f"{minutes}m" if rest_s == 0 else f"{minutes}m{rest_s:02d}s"


@dataclass(frozen=True)
class CaseCost:
    """A case's build and first-call seconds (None: no call made): from this run's first build; with `history`, from
    this machine's earlier runs (they order and cap shares, never skip a case before a call of its own in this run);
    with `predicted`, from the cost model. `model_call_s`: the cost model's first call of a case history prices, kept
    where history says one call cannot fit (the model, for this run, may still skip it unbuilt)."""

    build_s: float
    first_call_s: float | None = None
    predicted: bool = False
    history: bool = False
    model_call_s: float | None = None


def water_level(costs: list[float | None], left_s: float) -> float:
    """The level with sum(min(cost, level)) == left_s (an unknown None cost gets it); inf when every cost fits."""
    ordered = sorted(math.inf if cost is None else cost * COST_MARGIN for cost in costs)
    remaining_s, count = max(0.0, left_s), len(ordered)
    for cost in ordered:
        if cost * count <= remaining_s:
            remaining_s, count = remaining_s - cost, count - 1
        else:
            return remaining_s / count
    return math.inf


def share_of(cost: float | None, others: list[float | None], left_s: float) -> float:
    """One case's share of `left_s` beside `others`; when every known cost fits, costs are scaled up to fill it."""
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
    known_call_s: float | None = None  # its first call as priced before the build (this run, the model), checked then
    predicted_build_s: float | None = None  # the cost model's, where no history of the case exists
    expected_build_s: float | None = None  # what the plan expects the build to cost (history, else the model)
    priced_as: str = ""  # how a known first call was priced, said when it refuses the case
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
        return (f"over budget: its share of the {format_duration(self.budget_s)} budget is {share}, "
                "too little to build it and time one call — raise --budget or deselect cases")

    def over(self, call_s: float) -> str:
        """Why a case whose one call takes `call_s` is not measured, naming the fix."""
        budget, share = format_duration(self.budget_s), format_duration(self.share_s)
        if call_s <= self.share_s:
            spent = format_duration(self.now() - self.started_s)
            return (f"over budget: one call takes {format_duration(call_s)} and {spent} of its {share} share of the "
                    f"{budget} budget went to building and warming it up: no timed call fits — "
                    "raise --budget or deselect it")
        # the price is named only where it decided: a call measured in this build speaks for itself
        priced = f" ({self.priced_as})" if self.priced_as and call_s == self.known_call_s else ""
        return (f"over budget: one call takes {format_duration(call_s)}{priced}; its share of the {budget} budget is "
                f"{share} — raise --budget or deselect it")


class OverBudget(Exception):
    """A case skipped because one call does not fit its share; `columns` go into its row."""

    def __init__(self, reason: str, first_call_s: float | None) -> None:
        super().__init__(reason)
        self.columns = {"first_call_s": first_call_s}


def capped_plan(plan: RoundPlan, left_s: float) -> RoundPlan:
    """The rounds of `plan` that fit in `left_s` (at least 1: the caller checked one round fits)."""
    round_s = max(plan.estimate_s, 1e-9) * plan.iterations
    fit = max(1, int(left_s // round_s))
    return plan if fit >= plan.rounds else RoundPlan(plan.warmup_calls, plan.iterations, fit, plan.estimate_s)
