"""A run under --budget, seen from one build process: the (case, build) items still to run here and later, what
each costs (this machine's history, else the cost model), each case's share of the time left by tier, the plan line
and the progress."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from collections.abc import Callable

from gpubench.harness.core.run_budget import (
    COST_MARGIN, MIN_SHARE_S, CaseCost, CaseShare, format_duration, share_of, water_level,
)

NAMED_IN_PLAN = 4  # cases named per list in the plan line; the rest are counted
# The prices count as this many seconds of builds run at them: one short case cannot swing the plan on its own.
PRIOR_WEIGHT_S = 2.0
PACE_RANGE = (0.5, 20.0)  # a run's pace is clamped here: beyond it the prices, not the machine, are wrong
Item = tuple[str, int]  # (case id, build)


@dataclass
class BudgetPlan:
    """`here`: this process's (case id, build) items in order; `later`: those of later processes, each of which also
    pays `startup_s`. Times are wall clock, shared through `deadline_s`. Value first, in tiers: a `headline` case's
    first build is funded whole, other first builds share what those leave, repeats share the rest; within a tier
    items are water-filled by cost."""

    budget_s: float
    deadline_s: float
    costs: dict[str, CaseCost]
    here: list[Item]
    later: list[Item] = field(default_factory=list)
    later_processes: int = 0
    startup_s: float = 0.0
    now: Callable[[], float] = time.time
    cases: int = 0  # the selection's cases and builds, for the plan line
    builds: int = 0
    extra: bool = False  # an extra build (pytest_plugin.extra_build): a case runs whole or not at all
    headline: frozenset[str] = frozenset()
    seen: list[tuple[float, float]] = field(default_factory=list)  # (build s, its price) of this process's cases
    issued: dict[str, tuple[CaseCost, bool]] = field(default_factory=dict)  # case -> (its prices, share held it)
    promised: set[Item] | None = None  # the headline items the last plan line (or correction) said it funds
    history_note: str = ""  # what history passed over (durations.History.note), said once in the plan line

    def left_s(self) -> float:
        return self.deadline_s - self.now() - self.later_builds_fit() * self.startup_s

    def later_builds_fit(self) -> int:
        """The later build processes whose start-up the plan keeps time for: as many as fit beside this process's
        items at their smallest share, each with its own items at theirs. Kept for every one asked for, 99 later
        start-ups left a 30 s budget's first build 0 s a case: nothing was measured."""
        if not self.later_processes or self.startup_s <= 0:
            return self.later_processes
        room_s = self.deadline_s - self.now() - len(self.here) * MIN_SHARE_S
        per_build_s = self.startup_s + MIN_SHARE_S * len(self.later) / self.later_processes
        return min(self.later_processes, max(0, int(room_s // per_build_s)))

    def planned_later(self) -> list[Item]:
        """The later items the plan shares time with: those of the later builds that fit (a repeat water-filled
        beside 98 builds' repeats got 0.03 s where 10 builds fit)."""
        fit = self.later_builds_fit()
        if fit >= self.later_processes:
            return self.later
        builds = sorted({build for _, build in self.later})[:fit]
        return [item for item in self.later if item[1] in builds]

    def pace(self) -> float:
        """How much longer than their prices this run's cases take here now: the builds seen so far (priced and not
        capped), cost-weighted, starting at 1: the probe the cost model prices with ran under the same load as the
        cases (two spinning processes beside a run: 0.74x its prices). Every remaining price is multiplied by it."""
        actual_s = sum(build_s for build_s, _ in self.seen) + PRIOR_WEIGHT_S
        priced_s = sum(price_s for _, price_s in self.seen) + PRIOR_WEIGHT_S
        return min(max(actual_s / priced_s, PACE_RANGE[0]), PACE_RANGE[1])

    def cost(self, case_id: str) -> float | None:
        known = self.costs.get(case_id)
        return known.build_s * self.pace() if known is not None else None

    def first_call_s(self, case_id: str) -> float | None:
        """A case's first call at this run's pace, checked before it is built: this run's first build's, or the cost
        model's once this process has seen how far its prices are off (before that, the case's own call decides).
        History's is never checked: earlier runs order and cap, and a case they say is too slow still gets a call of
        its own here, unless the cost model says so too."""
        known = self.costs.get(case_id)
        if known is None:
            return None
        call_s, modelled = (known.model_call_s, True) if known.history else (known.first_call_s, known.predicted)
        if call_s is None or (modelled and not self.seen):
            return None
        return call_s * self.pace()

    def is_headline(self, item: Item) -> bool:
        return item[0] in self.headline and item[1] == 0 and not self.extra

    def tier(self, item: Item) -> int:
        """0: a headline case's first build; 1: another case's first build; 2: a repeat."""
        return 0 if self.is_headline(item) else 1 if item[1] == 0 else 2

    def fits(self, case_id: str) -> bool:
        """Whether the case's known build (with its margin) fits the time left: an extra build caps or skips none."""
        cost_s = self.cost(case_id)
        return cost_s is not None and max(cost_s * COST_MARGIN, MIN_SHARE_S) <= self.left_s()

    def share_for(self, case_id: str) -> CaseShare:
        """This case's share of what is left (an extra build: all of it; `fits` checked its build needs that)."""
        known = self.costs.get(case_id)
        known_call_s = self.first_call_s(case_id)
        predicted_s = known.build_s if known and known.predicted else None
        if self.extra:
            return CaseShare(max(self.left_s(), 0.0), self.budget_s, known_call_s)
        item = self._item(case_id)
        tier, pending = self.tier(item), self.pending_after(item)
        same_tier = [other for other in pending if self.tier(other) == tier]
        headline_s, unknown = self._funded_reserve_s(besides=item)
        if tier == 0:  # funded whole: what the other funded headline items leave (split where no cost is known)
            share_s = max(self.left_s() - headline_s, 0.0) / (1 + unknown if known is None else 1)
        else:  # what the tiers before it still need is kept out
            first_builds = [other for other in pending if self.tier(other) == 1] if tier == 2 else []
            reserve_s = headline_s + sum(map(self._reserve_s, first_builds))
            share_s = share_of(self.cost(case_id), [self.cost(other[0]) for other in same_tier],
                               self.left_s() - reserve_s)
        cost_s = self.cost(case_id)
        if known is not None and cost_s is not None:
            self.issued[case_id] = (known, share_s >= cost_s * COST_MARGIN)
        return CaseShare(share_s, self.budget_s, known_call_s, predicted_s, cost_s, self._priced_as(known))

    def _priced_as(self, known: CaseCost | None) -> str:
        """How a refused case was priced, for its reason: the source and this run's pace."""
        if known is None:
            return ""
        pace = self.pace()
        paced = f" x{pace:.2g}, this run's pace" if abs(pace - 1) >= 0.05 else ""
        if known.history:  # refused by the model alone: history agreeing is said, never the reason
            said = format_duration(known.first_call_s or 0.0)
            return f"the cost model's price{paced}; this machine's history said {said}" if known.model_call_s else ""
        source = "the cost model" if known.predicted else "this run's first build"
        return f"{source}'s price{paced}" if paced else ""

    def _funded_reserve_s(self, besides: Item) -> tuple[float, int]:
        """What the funded headline items other than `besides` keep out, and how many have no cost yet. One left out
        reserves nothing (reserved, it starved the very headline cases the plan line said it funds)."""
        funded, _, open_items = self._headline_verdicts(self.left_s())
        return (sum(self._reserve_s(other) for other in funded if other != besides),
                sum(other != besides for other in open_items))

    def _reserve_s(self, item: Item) -> float:
        cost_s = self.cost(item[0])
        return 0.0 if cost_s is None else cost_s * COST_MARGIN

    def _item(self, case_id: str) -> Item:
        return next((item for item in self.here if item[0] == case_id), (case_id, 0))

    def pending_after(self, item: Item) -> list[Item]:
        rest = list(self.here)
        if item in rest:
            rest.remove(item)
        return rest + self.planned_later()

    def done(self, case_id: str, skipped: bool, build_s: float | None = None,
             first_call_s: float | None = None) -> None:
        """One item ran (or was passed over); a skipped case's later builds will not run, here or later. What it
        took against its price sets the pace of the rest: a whole (not capped) build's seconds, else its first call's
        (a case refused after its first call is the clearest sign the prices are off)."""
        issued = self.issued.pop(case_id, None)
        if issued is not None:
            known, whole = issued
            if build_s is not None and whole and not skipped:
                self.seen.append((build_s, known.build_s))
            elif first_call_s is not None and known.first_call_s:
                self.seen.append((first_call_s, known.first_call_s))
        item = self._item(case_id)
        if item in self.here:
            self.here.remove(item)
        if skipped:
            self.here = [other for other in self.here if other[0] != case_id]
            self.later = [other for other in self.later if other[0] != case_id]

    def progress(self) -> str:
        items = len(self.here) + len(self.later)
        return f"budget: {self.time_left()} of {format_duration(self.budget_s)}, {items} case builds to go"

    def time_left(self) -> str:
        return f"{format_duration(max(0.0, self.deadline_s - self.now()))} left"

    def plan_line(self) -> str:
        """Before the first case: the headline cases funded and left out (with the budget that includes them), then
        the cases whose one call cannot fit their share (skipped) or that get less than their full time (capped)."""
        items = self.here + self.planned_later()
        left_s = self.left_s()
        funded, left_out, open_headline = self._headline_verdicts(left_s)
        headline_s = sum(self._reserve_s(item) for item in funded)
        planned_s, verdicts = headline_s, ([], [], [])
        for tier in (1, 2):  # a repeat is not named: repeats get what the first builds leave, as many as fit
            rest = [item for item in items if self.tier(item) == tier]
            level = water_level([self.cost(c) for c, _ in rest], left_s - planned_s)
            verdicts = self._verdicts(rest, level) if tier == 1 else verdicts
            planned_s += sum(min(self._reserve_s(item), level) if self.cost(item[0]) is not None else level
                             for item in rest)
        planned_s = min(left_s, planned_s)
        skipped, capped, tried = verdicts
        priced = [self.costs[case_id] for case_id in {c for c, _ in items} if case_id in self.costs]
        predicted = sum(known.predicted for known in priced)
        known, unknown = len(priced) - predicted, len({c for c, _ in items}) - len(priced)
        head = f"plan ~{format_duration(max(planned_s, 0.0))} of a {format_duration(self.budget_s)} budget"
        parts = [f"{head}: {self.cases} cases x {self.builds} builds; costs: this machine's history {known}, "
                 f"the cost model {predicted}" + (f", none {unknown} (their first call decides)" if unknown else "")]
        headline_cases = len(funded) + len(left_out) + len(open_headline)
        if headline_cases:
            parts.append(f"headline first: {len(funded)} of {headline_cases} funded whole "
                         f"(~{format_duration(headline_s)})")
        self.promised = set(funded)
        if left_out:
            parts.append(f"headline left out: {named([c for c, _ in left_out])} — "
                         f"--budget {format_duration(self._budget_including(funded + left_out))} includes them")
        parts += [f"{label}: {named(found)}" for label, found in (("skipped", skipped), ("capped", capped),
                                                                  ("one try, history says too slow", tried)) if found]
        parts += self._fewer_builds() + ([self.history_note] if self.history_note else [])
        return "gpubench: " + "; ".join(parts)

    def _fewer_builds(self) -> list[str]:
        """The later builds the plan has no time for, said with the fix (they start anyway if time is left)."""
        fit = self.later_builds_fit()
        if fit >= self.later_processes:
            return []
        return [f"later builds: time kept for {fit} of {self.later_processes} (each starts in "
                f"~{format_duration(self.startup_s)}; more start if time is left) — pass fewer --builds or a longer "
                "--budget for all"]

    def _budget_including(self, items: list[Item]) -> float:
        return rounded_up(self.budget_s - self.left_s() + sum(self._reserve_s(item) for item in items))

    def correction(self) -> str | None:
        """After a case: the headline items promised that the re-priced plan can no longer fund, said out loud once
        (None when the promise holds). The first call only records what is promised."""
        funded, left_out, _ = self._headline_verdicts(self.left_s())
        if self.promised is None:
            self.promised = set(funded)
            return None
        dropped = [item for item in left_out if item in self.promised]
        if not dropped:
            return None
        self.promised -= set(dropped)
        return (f"gpubench: plan corrected: this run's cases take {self.pace():.2g}x their prices here now; headline "
                f"no longer funded: {named([c for c, _ in dropped])} — --budget "
                f"{format_duration(self._budget_including(funded + left_out))} includes them")

    def _headline_verdicts(self, left_s: float) -> tuple[list[Item], list[Item], list[Item]]:
        """The headline items in run order: funded (their cost fits what earlier ones left), left out, unknown cost."""
        funded, left_out, unknown = [], [], []
        for item in dict.fromkeys(self.here + self.planned_later()):
            if not self.is_headline(item):
                continue
            if self.cost(item[0]) is None:
                unknown.append(item)
            elif self._reserve_s(item) <= left_s:
                funded.append(item)
                left_s -= self._reserve_s(item)
            else:
                left_out.append(item)
        return funded, left_out, unknown

    def _verdicts(self, items: list[Item], level: float) -> tuple[list[str], list[str], list[str]]:
        """Skipped (a call priced by this run or the model does not fit), capped, and tried once (history alone says
        the call does not fit: it is no reason to skip)."""
        skipped, capped, tried = [], [], []
        for case_id in dict.fromkeys(c for c, _ in items):
            known = self.costs.get(case_id)
            if known is None:
                continue
            cost_s, pace = known.build_s * self.pace(), self.pace()
            share_s = min(cost_s * COST_MARGIN, level)
            share = format_duration(share_s)
            checked_s = known.model_call_s if known.history else known.first_call_s
            if checked_s is not None and checked_s * pace > share_s:
                call = ("~" if known.predicted or known.history else "") + format_duration(checked_s * pace)
                said = f"; history said {format_duration(known.first_call_s or 0.0)}" if known.history else ""
                skipped.append(f"{case_id} (one call {call} > its {share} share{said})")
            elif known.history and known.first_call_s is not None and known.first_call_s * pace > share_s:
                tried.append(f"{case_id} (one call {format_duration(known.first_call_s * pace)} > its {share} share)")
            elif cost_s * COST_MARGIN > level:
                capped.append(f"{case_id} ({share} of its {format_duration(cost_s)})")
        return skipped, capped, tried


def rounded_up(seconds: float, step_s: float = 30.0) -> float:
    return math.ceil(seconds / step_s) * step_s


def named(found: list[str]) -> str:
    shown = ", ".join(found[:NAMED_IN_PLAN])
    return shown + (f" and {len(found) - NAMED_IN_PLAN} more" if len(found) > NAMED_IN_PLAN else "")


# The run's start: when this pytest configuration began, not the process (pytester, a notebook, a long-lived worker
# may have lived longer than any budget). Leaves out the interpreter's start and pytest's import (~0.3 s).
_run_began_s: float | None = None


def note_run_began() -> None:
    global _run_began_s
    _run_began_s = time.time()


def run_startup_s() -> float:
    """Seconds this run has taken so far: what each later build process pays again before its first case."""
    return max(0.0, time.time() - _run_began_s) if _run_began_s is not None else 0.0


def budget_plan(budget_s: float, deadline_s: float | None, costs: dict[str, CaseCost], entries: list[Item],
                only_build: int | None, skipped: set[str], extra: bool = False,
                headline: frozenset[str] = frozenset()) -> BudgetPlan:
    """One process's plan from every selected (case id, build) in run order; `deadline_s` None: this process is the
    whole run. Cases an earlier build already skipped are not planned for."""
    startup_s = run_startup_s()
    deadline_s = deadline_s if deadline_s is not None else time.time() - startup_s + budget_s
    size = {"cases": len({c for c, _ in entries}), "builds": max(build for _, build in entries) + 1,
            "headline": headline}
    if only_build is None:
        return BudgetPlan(budget_s, deadline_s, costs, [e for e in entries if e[0] not in skipped], **size)
    here = [e for e in entries if e[1] == only_build and e[0] not in skipped]
    later = [e for e in entries if e[1] > only_build and e[0] not in skipped]
    processes = len({build for _, build in entries if build > only_build})
    return BudgetPlan(budget_s, deadline_s, costs, here, later, processes, startup_s, extra=extra, **size)
