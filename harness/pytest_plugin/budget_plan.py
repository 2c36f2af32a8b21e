"""A run under --budget, seen from one build process: the (case, build) items still to run here and
in the later build processes, this machine's history of what each case costs, each case's share
of the time left, the plan line shown before the first case and the progress after each."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from collections.abc import Callable

from gpubench.harness.core.run_budget import (
    COST_MARGIN,
    MIN_SHARE_S,
    CaseCost,
    CaseShare,
    format_duration,
    share_of,
    water_level,
)

NAMED_IN_PLAN = 4  # cases named per list in the plan line; the rest are counted


@dataclass
class BudgetPlan:
    """`here`: case ids this process runs, in order; `later`: one case id per item of a later build
    process, each of which also pays `startup_s` before its first case. Times are wall clock
    (time.time), shared across processes through `deadline_s`."""

    budget_s: float
    deadline_s: float
    costs: dict[str, CaseCost]
    here: list[str]
    later: list[str] = field(default_factory=list)
    later_processes: int = 0
    startup_s: float = 0.0
    now: Callable[[], float] = time.time
    cases: int = 0  # the selection's cases and builds, for the plan line
    builds: int = 0
    extra: bool = False  # an extra build (gpubench.harness.pytest_plugin.extra_build): a case runs whole or not at all

    def left_s(self) -> float:
        return self.deadline_s - self.now() - self.later_processes * self.startup_s

    def cost(self, case_id: str) -> float | None:
        known = self.costs.get(case_id)
        return known.build_s if known is not None else None

    def fits(self, case_id: str) -> bool:
        """Whether the case's known build (with its margin) fits the time left: an extra build runs
        no case it would have to cap or skip."""
        cost_s = self.cost(case_id)
        return cost_s is not None and max(cost_s * COST_MARGIN, MIN_SHARE_S) <= self.left_s()

    def share_for(self, case_id: str) -> CaseShare:
        """This case's share of what is left, beside every item still to run after it (in an extra
        build: all that is left, which `fits` checked its known build needs; the profile's rounds, not
        the share, say how long it runs)."""
        known = self.costs.get(case_id)
        if self.extra:
            return CaseShare(max(self.left_s(), 0.0), self.budget_s, known.first_call_s if known else None)
        others = [self.cost(c) for c in self.pending_after(case_id)]
        share_s = share_of(self.cost(case_id), others, self.left_s())
        return CaseShare(share_s, self.budget_s, known.first_call_s if known else None)

    def pending_after(self, case_id: str) -> list[str]:
        rest = list(self.here)
        if case_id in rest:
            rest.remove(case_id)
        return rest + self.later

    def done(self, case_id: str, skipped: bool) -> None:
        """One item ran (or was passed over); a skipped case's later builds will not run."""
        if case_id in self.here:
            self.here.remove(case_id)
        if skipped:
            self.later = [c for c in self.later if c != case_id]

    def progress(self) -> str:
        items = len(self.here) + len(self.later)
        left = format_duration(max(0.0, self.deadline_s - self.now()))
        return f"budget: {left} left of {format_duration(self.budget_s)}, {items} case builds to go"

    def plan_line(self) -> str:
        """What the budget will do, from history: the cases whose one call cannot fit their share
        (skipped), those that get less than their full time (capped), and those with no history."""
        items = self.here + self.later
        left_s = self.left_s()
        level = water_level([self.cost(c) for c in items], left_s)
        skipped, capped, unknown = self._verdicts(level)
        full_s = sum(self.cost(c) or 0.0 for c in items)
        planned_s = left_s if not math.isinf(level) or unknown else min(left_s, full_s * COST_MARGIN)
        head = f"plan ~{format_duration(max(planned_s, 0.0))} of a {format_duration(self.budget_s)} budget"
        parts = [f"{head}: {self.cases} cases x {self.builds} builds"]
        if len(unknown) < len(set(items)):
            known = len(set(items)) - len(unknown)
            parts.append(f"this machine's history for {known} cases ({format_duration(full_s)} at full length)")
        if unknown:
            parts.append(f"{len(unknown)} without history: their first call decides")
        parts += [f"{label}: {named(found)}" for label, found in (("skipped", skipped), ("capped", capped)) if found]
        return "gpubench: " + "; ".join(parts)

    def _verdicts(self, level: float) -> tuple[list[str], list[str], list[str]]:
        skipped, capped, unknown = [], [], []
        for case_id in dict.fromkeys(self.here + self.later):
            known = self.costs.get(case_id)
            if known is None:
                unknown.append(case_id)
                continue
            share_s = min(known.build_s * COST_MARGIN, level)
            if known.first_call_s is not None and known.first_call_s > share_s:
                call = format_duration(known.first_call_s)
                skipped.append(f"{case_id} (one call {call} > its {format_duration(share_s)} share)")
            elif known.build_s * COST_MARGIN > level:
                capped.append(f"{case_id} ({format_duration(share_s)} of its {format_duration(known.build_s)})")
        return skipped, capped, unknown


def named(found: list[str]) -> str:
    shown = ", ".join(found[:NAMED_IN_PLAN])
    return shown + (f" and {len(found) - NAMED_IN_PLAN} more" if len(found) > NAMED_IN_PLAN else "")


# When this run's pytest configuration began (the plugin's options registered): the run's start. Not the
# process's start: a process that runs pytest in-process (a notebook, pytester, a long-lived worker) may have
# lived longer than any budget before this run. Left out: the interpreter's start and pytest's import before
# it, about 0.3 s in a fresh process (a forked build pays neither).
_run_began_s: float | None = None


def note_run_began() -> None:
    global _run_began_s
    _run_began_s = time.time()


def run_startup_s() -> float:
    """Seconds this run has taken so far (pytest, torch, collection): what each later build process
    will pay again before its first case."""
    return max(0.0, time.time() - _run_began_s) if _run_began_s is not None else 0.0


def budget_plan(budget_s: float, deadline_s: float | None, costs: dict[str, CaseCost], entries: list[tuple[str, int]],
                only_build: int | None, skipped: set[str], extra: bool = False) -> BudgetPlan:
    """The plan of one process from every selected (case id, build) in run order. `deadline_s`:
    the run's, from `gpubench run` (None: this process is the whole run, from its start). Cases
    already skipped in the run's file (an earlier build process) are not planned for."""
    startup_s = run_startup_s()
    deadline_s = deadline_s if deadline_s is not None else time.time() - startup_s + budget_s
    size = {"cases": len({c for c, _ in entries}), "builds": max(build for _, build in entries) + 1}
    if only_build is None:
        return BudgetPlan(budget_s, deadline_s, costs, [c for c, _ in entries if c not in skipped], **size)
    here = [c for c, build in entries if build == only_build and c not in skipped]
    later = [c for c, build in entries if build > only_build and c not in skipped]
    processes = len({build for _, build in entries if build > only_build})
    return BudgetPlan(budget_s, deadline_s, costs, here, later, processes, startup_s, extra=extra, **size)
