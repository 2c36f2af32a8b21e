"""A run under --budget, seen from one build process: the (case, build) items still to run here and
later, what each costs, each case's share of the time left, the plan's lines and its promise.

Headline cases (the report summary's) come first and whole, each priced by itself: its own
measurements here (this machine's history, this run's first build), else the cost model's price as
it is. The plan promises them once, in its first line, and leaves one out only where its own
measured cost cannot fit what the budget has left; nothing learned on other cases reprices them. The
rest fill the time the headline cases leave: their prices are scaled by this run's pace (how long
its cases take against their prices), and each says how it went as it ends."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gpubench.harness.budget.shares import COST_MARGIN, MIN_SHARE_S, CaseCost, CaseShare, share_of
from gpubench.harness.core.duration_text import format_duration

# Cases named per list in a plan line; the rest are counted. A plan line fits on one screen line or
# two.
NAMED_IN_PLAN = 4
LINE_CHARS = 200
# The prices count as this many seconds of builds run at them: one short case cannot swing the plan
# on its own.
PRIOR_WEIGHT_S = 2.0
# A run's pace is clamped here: beyond it the prices, not the machine, are wrong.
PACE_RANGE = (0.5, 20.0)
# The cost model is good to about a factor of two: a headline priced by it alone gets at least twice
# its price.
MODEL_ERROR = 2.0
# A headline's share is never below this while the budget has it: the first case of a build pays its
# process's first touches (2.5 s for a 0.45 s transformer step beside a spinning process on a 2-core
# VM).
HEADLINE_FLOOR_S = 10.0
Item = tuple[str, int]


@dataclass
class BudgetPlan:
    """`here`: this process's (case id, build) items in order; `later`: those of later processes,
    each of which also pays `startup_s`. Times are wall clock, shared through `deadline_s`. Tiers: a
    headline case's first build, funded whole and promised; other first builds share what those
    leave; repeats share the rest."""

    budget_s: float
    deadline_s: float
    costs: dict[str, CaseCost]
    here: list[Item]
    later: list[Item] = field(default_factory=list)
    later_processes: int = 0
    startup_s: float = 0.0
    now: Callable[[], float] = time.time
    # the selection's cases and builds, for the plan line
    cases: int = 0
    builds: int = 0
    # an extra build (pytest_plugin.extra_build): a case runs whole or not at all
    extra: bool = False
    headline: frozenset[str] = frozenset()
    # (build s, its price) of this process's whole builds: the pace of the rest
    seen: list[tuple[float, float]] = field(default_factory=list)
    issued: dict[str, tuple[CaseCost, bool]] = field(default_factory=dict)
    # what history passed over (durations.History.note), said once with the plan
    history_note: str = ""
    # the promise, decided once (promise()): headline cases funded whole, and those left out with
    # their measured cost
    promised: list[str] | None = None
    left_out: dict[str, float] = field(default_factory=dict)

    def left_s(self) -> float:
        return self.deadline_s - self.now() - self.later_builds_fit() * self.startup_s

    def later_builds_fit(self) -> int:
        """The later build processes whose start-up the plan keeps time for: as many as fit beside
        this process's items at their smallest share, each with its own items at theirs."""
        if not self.later_processes or self.startup_s <= 0:
            return self.later_processes
        room_s = self.deadline_s - self.now() - len(self.here) * MIN_SHARE_S
        per_build_s = self.startup_s + MIN_SHARE_S * len(self.later) / self.later_processes
        return min(self.later_processes, max(0, int(room_s // per_build_s)))

    def planned_later(self) -> list[Item]:
        """The later items the plan shares time with: those of the later builds that fit."""
        fit = self.later_builds_fit()
        if fit >= self.later_processes:
            return self.later
        builds = sorted({build for _, build in self.later})[:fit]
        return [item for item in self.later if item[1] in builds]

    def pace(self) -> float:
        """How much longer than their prices this run's cases take here now: the whole builds seen
        so far, cost-weighted, starting at 1. It scales the prices of the cases that fill the time
        left, never a headline's."""
        actual_s = sum(build_s for build_s, _ in self.seen) + PRIOR_WEIGHT_S
        priced_s = sum(price_s for _, price_s in self.seen) + PRIOR_WEIGHT_S
        return min(max(actual_s / priced_s, PACE_RANGE[0]), PACE_RANGE[1])

    def cost(self, case_id: str) -> float | None:
        """A case's build at this run's pace (the cases that fill the time left)."""
        known = self.costs.get(case_id)
        return known.build_s * self.pace() if known is not None else None

    def own_price_s(self, case_id: str) -> float | None:
        """A case's build as its own measurements here price it (history, this run's first build);
        None where only the cost model has priced it, or nothing has."""
        known = self.costs.get(case_id)
        return None if known is None or known.predicted else known.build_s

    def headline_price_s(self, case_id: str) -> float | None:
        """What a headline case keeps for itself: its own price, else the cost model's as it is (no
        pace)."""
        known = self.costs.get(case_id)
        return None if known is None else known.build_s

    def first_call_s(self, case_id: str) -> float | None:
        """A case's first call at this run's pace, checked before it is built: this run's first
        build's, or the cost model's once this process has seen how far its prices are off. A
        headline's own call decides alone; history's is never checked (a case it says is too slow
        still gets a call of its own here, unless the model agrees)."""
        known = self.costs.get(case_id)
        if known is None or self.is_headline(self._item(case_id)):
            return None
        call_s, modelled = (
            (known.model_call_s, True) if known.history else (known.first_call_s, known.predicted)
        )
        if call_s is None or (modelled and not self.seen):
            return None
        return call_s * self.pace()

    def is_headline(self, item: Item) -> bool:
        return item[0] in self.headline and item[1] == 0 and not self.extra

    def tier(self, item: Item) -> int:
        """0: a headline case's first build; 1: another case's first build; 2: a repeat."""
        return 0 if self.is_headline(item) else 1 if item[1] == 0 else 2

    def headline_items(self) -> list[Item]:
        return [
            item
            for item in dict.fromkeys(self.here + self.planned_later())
            if self.is_headline(item)
        ]

    def promise(self) -> list[str]:
        """The headline cases funded whole, decided once: in run order, each whose own measured
        price fits what the budget has left after those before it; one priced by the cost model
        alone is promised (its own first call decides). The others are left out, each with the cost
        it was measured at."""
        if self.promised is None:
            left_s, self.promised = self.deadline_s - self.now(), []
            for case_id, _ in self.headline_items():
                own_s = self.own_price_s(case_id)
                if own_s is not None and own_s > left_s:
                    self.left_out[case_id] = own_s
                    continue
                self.promised.append(case_id)
                left_s -= own_s or 0.0
        return self.promised

    def fits(self, case_id: str) -> bool:
        """Whether the case's known build (with its margin) fits the time left: an extra build caps
        or skips none."""
        cost_s = self.cost(case_id)
        return cost_s is not None and max(cost_s * COST_MARGIN, MIN_SHARE_S) <= self.left_s()

    def share_for(self, case_id: str) -> CaseShare:
        """This case's share of what is left (an extra build: all of it; `fits` checked its build
        needs that)."""
        known = self.costs.get(case_id)
        predicted_s = known.build_s if known and known.predicted else None
        if self.extra:
            return CaseShare(max(self.left_s(), 0.0), self.budget_s, self.first_call_s(case_id))
        item = self._item(case_id)
        if self.is_headline(item):
            return self._headline_share(case_id, predicted_s)
        tier = self.tier(item)
        pending = self.pending_after(item)
        same_tier = [other for other in pending if self.tier(other) == tier]
        first_builds = [other for other in pending if self.tier(other) == 1] if tier == 2 else []
        reserve_s = self._headline_reserve_s(besides=item) + sum(map(self._reserve_s, first_builds))
        share_s = share_of(
            self.cost(case_id),
            [self.cost(other[0]) for other in same_tier],
            self.left_s() - reserve_s,
        )
        cost_s = self.cost(case_id)
        if known is not None and cost_s is not None:
            self.issued[case_id] = (known, share_s >= cost_s * COST_MARGIN)
        return CaseShare(
            share_s,
            self.budget_s,
            self.first_call_s(case_id),
            predicted_s,
            cost_s,
            self._priced_as(known),
        )

    def _headline_share(self, case_id: str, predicted_s: float | None) -> CaseShare:
        """All the time left but what the promised headline cases after it were measured to cost
        here (a cost-model price keeps nothing back: a guess must not starve a case that came
        first), and at least its own price with its margin (twice a cost model's) and
        HEADLINE_FLOOR_S while the budget has them: the first come first, whole. A share is a bound,
        not a spending: a case takes what its own timing asks."""
        if case_id in self.left_out or case_id not in self.promise():
            return CaseShare(0.0, self.budget_s, left_out=self.left_out_reason(case_id))
        left_s = max(self.deadline_s - self.now(), 0.0)
        price_s = self.headline_price_s(case_id)
        own = self.own_price_s(case_id) is not None
        floor_s = min(
            left_s, max((price_s or 0.0) * (COST_MARGIN if own else MODEL_ERROR), HEADLINE_FLOOR_S)
        )
        share_s = max(
            left_s - self._headline_reserve_s(besides=(case_id, 0), measured_only=True), floor_s
        )
        known = self.costs.get(case_id)
        if known is not None and price_s is not None:
            self.issued[case_id] = (known, True)
        return CaseShare(share_s, self.budget_s, None, predicted_s, price_s)

    def _headline_reserve_s(self, besides: Item, measured_only: bool = False) -> float:
        """What the promised headline cases still to run, other than `besides`, keep for themselves:
        their own measured prices, and (for the cases after them) the cost model's too."""
        pending = [case_id for case_id, _ in self.headline_items() if (case_id, 0) != besides]
        promised = set(self.promise())
        price = self.own_price_s if measured_only else self.headline_price_s
        return sum(price(case_id) or 0.0 for case_id in pending if case_id in promised)

    def left_out_reason(self, case_id: str) -> str:
        """Why the plan left a headline case out, naming its measured cost and the budget that
        includes it."""
        own_s = self.left_out.get(case_id)
        cost = (
            f"it took {format_duration(own_s)} here before"
            if own_s is not None
            else "no time was left for it"
        )
        return (
            f"over budget: left out by the plan (its first line): {cost}, more than the budget "
            f"had left for it — --budget {format_duration(self.budget_including())} includes it"
        )

    def _priced_as(self, known: CaseCost | None) -> str:
        """How a refused case was priced, for its reason: the source and this run's pace."""
        if known is None:
            return ""
        pace = self.pace()
        paced = f" x{pace:.2g}, this run's pace" if abs(pace - 1) >= 0.05 else ""
        if known.history:
            said = format_duration(known.first_call_s or 0.0)
            return (
                f"the cost model's price{paced}; this machine's history said {said}"
                if known.model_call_s
                else ""
            )
        source = "the cost model" if known.predicted else "this run's first build"
        return f"{source}'s price{paced}" if paced else ""

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

    def done(
        self,
        case_id: str,
        skipped: bool,
        build_s: float | None = None,
        first_call_s: float | None = None,
    ) -> None:
        """One item ran (or was passed over); a skipped case's later builds will not run, here or
        later. What it took against its price sets the pace of the rest: a whole (not capped)
        build's seconds, else its first call's (a case refused after its first call is the clearest
        sign the prices are off)."""
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
        return (
            f"budget: {self.time_left()} of {format_duration(self.budget_s)}, {items} case builds "
            "to go"
        )

    def time_left(self) -> str:
        return f"{format_duration(max(0.0, self.deadline_s - self.now()))} left"

    def plan_lines(self) -> list[str]:
        """Before the first case, each line short and true at the run's end: the headline cases
        promised (and those left out, with their measured cost and the budget that includes them),
        how the rest is filled, the later builds the budget has no time for, what history passed
        over."""
        promised = self.promise()
        headline_s = sum(self.headline_price_s(case_id) or 0.0 for case_id in promised)
        rest = (
            {case_id for case_id, _ in self.here + self.planned_later()}
            - set(promised)
            - set(self.left_out)
        )
        budget = format_duration(self.budget_s)
        lines = [
            f"gpubench: plan for the {budget} budget: "
            + ", then ".join(
                filter(
                    None,
                    (
                        self._headline_words(promised, headline_s),
                        self._rest_words(len(rest), bool(promised)),
                    ),
                )
            )
        ]
        if self.left_out:
            head, fix = (
                "gpubench: headline left out, too slow here before: ",
                f" — --budget {format_duration(self.budget_including())} includes them",
            )
            lines.append(
                head + named(self._left_out_words(), LINE_CHARS - len(head) - len(fix)) + fix
            )
        lines += self._fewer_builds() + (
            [f"gpubench: {self.history_note}"] if self.history_note else []
        )
        return lines

    def _headline_words(self, promised: list[str], headline_s: float) -> str:
        if not promised:
            return ""
        measured = sum(self.own_price_s(case_id) is not None for case_id in promised)
        modelled = len(promised) - measured
        source = (
            " by their own times here"
            if not modelled
            else " by the cost model's prices"
            if not measured
            else f": {measured} priced by {'its' if measured == 1 else 'their'} own time here, "
            f"{modelled} by the cost model"
        )
        cases = "case" if len(promised) == 1 else "cases"
        beyond = headline_s > self.deadline_s - self.now()
        over = "; more than the time left: their own first steps decide" if beyond else ""
        return (
            f"{len(promised)} headline {cases} first, each whole "
            f"(~{format_duration(headline_s)}{source}{over})"
        )

    def _rest_words(self, cases: int, after_headline: bool) -> str:
        if not cases:
            return ""
        other = " other" if after_headline else ""
        builds = f" x {self.builds} builds" if self.builds > 1 else ""
        if cases == 1 and not builds:
            return f"1{other} case shares the time left"
        return f"{cases}{other} case{'s' if cases > 1 else ''}{builds} share the time left"

    def _left_out_words(self) -> list[str]:
        return [f"{case_id} ({format_duration(own_s)})" for case_id, own_s in self.left_out.items()]

    def _fewer_builds(self) -> list[str]:
        """The later builds the plan has no time for, said with the fix (they start anyway if time
        is left)."""
        fit = self.later_builds_fit()
        if fit >= self.later_processes:
            return []
        return [
            f"gpubench: later builds: time kept for {fit} of {self.later_processes} (each starts "
            f"in ~{format_duration(self.startup_s)}) — pass fewer --builds or a longer --budget "
            "for all"
        ]

    def budget_including(self) -> float:
        """A budget that also holds the headline cases left out, at their measured cost."""
        spent_s = self.budget_s - (self.deadline_s - self.now())
        promised_s = sum(self.headline_price_s(case_id) or 0.0 for case_id in self.promise())
        return rounded_up(
            max(spent_s, 0.0) + promised_s + sum(self.left_out.values()) * COST_MARGIN
        )


def run_order(
    case_id: str | None, build: int, headline: frozenset[str], costs: dict[str, CaseCost]
) -> tuple[int, int, float]:
    """Where a (case, build) runs: build by build; in each, the headline cases first, the cheapest
    first by their own price (else the cost model's), so a slow one can take only what the cheaper
    ones leave, never their time."""
    if case_id is None or case_id not in headline:
        return build, 1, 0.0
    known = costs.get(case_id)
    return build, 0, known.build_s if known is not None else math.inf


def rounded_up(seconds: float, step_s: float = 30.0) -> float:
    return math.ceil(seconds / step_s) * step_s


def named(found: list[str], room: int = LINE_CHARS) -> str:
    """'a, b and 3 more': as many of `found` as fit in `room` characters (at most NAMED_IN_PLAN),
    the rest counted."""
    for count in range(min(len(found), NAMED_IN_PLAN), 0, -1):
        rest = f" and {len(found) - count} more" if count < len(found) else ""
        text = ", ".join(found[:count]) + rest
        if len(text) <= room or count == 1:
            return text
    return ""


def budget_plan(
    budget_s: float,
    deadline_s: float,
    costs: dict[str, CaseCost],
    entries: list[Item],
    only_build: int | None,
    skipped: set[str],
    startup_s: float = 0.0,
    extra: bool = False,
    headline: frozenset[str] = frozenset(),
) -> BudgetPlan:
    """One process's plan from every selected (case id, build) in run order, by the run's one
    deadline (budget.clock.run_deadline_s); `startup_s`: what a later build process pays before its
    first case. Cases an earlier build already skipped are not planned for."""
    size = {
        "cases": len({c for c, _ in entries}),
        "builds": max(build for _, build in entries) + 1,
        "headline": headline,
    }
    if only_build is None:
        plan = BudgetPlan(
            budget_s, deadline_s, costs, [e for e in entries if e[0] not in skipped], **size
        )
    else:
        here = [e for e in entries if e[1] == only_build and e[0] not in skipped]
        later = [e for e in entries if e[1] > only_build and e[0] not in skipped]
        processes = len({build for _, build in entries if build > only_build})
        plan = BudgetPlan(
            budget_s, deadline_s, costs, here, later, processes, startup_s, extra=extra, **size
        )
    plan.promise()
    return plan
