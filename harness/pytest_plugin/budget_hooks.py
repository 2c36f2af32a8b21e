"""The plugin's side of --budget: the plan over a build's selected items from this machine's
history, its line before the first case, and the cut of a test still running past the run's end and
its grace."""

from __future__ import annotations

import time
from dataclasses import replace
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from gpubench.harness.core.console import CONSOLE
from gpubench.harness.core.exits import ExitCode
from gpubench.harness.budget.shares import CaseCost
from gpubench.harness.budget.clock import (
    DeadlinePassed,
    cut_after,
    cut_reason,
    grace_s,
    run_startup_s,
)
from gpubench.harness.budget.plan import BudgetPlan, budget_plan, run_order
from gpubench.harness.pytest_plugin.build_answer import answer_writer, this_build
from gpubench.harness.pytest_plugin.console import console_of
from gpubench.harness.pytest_plugin.extra_build import build_of, case_id_of, params_of

if TYPE_CHECKING:
    from gpubench.harness.pytest_plugin.run_state import RunState
    from gpubench.harness.records.durations import History


def plan_budget(state: RunState, items: list[pytest.Item]) -> BudgetPlan | None:
    """The plan over every selected (case, build): this run's first build or this machine's history,
    else the cost model's prediction."""
    from gpubench.harness.measurement.run_records import skipped_in

    if not planned_entries(state.case_builds, items) or state.budget_s is None:
        return None
    found = known_costs(state)
    selected = {
        case.case_id: (workload, case)
        for workload, case in map(workload_case, items)
        if case is not None
    }
    doubted = [
        case_id
        for case_id in selected
        if too_slow_to_trust(found.costs.get(case_id), state.budget_s, len(selected))
    ]
    priced = predicted_costs(
        state,
        [
            pair
            for case_id, pair in selected.items()
            if case_id not in found.costs or case_id in doubted
        ],
    )
    modelled = {
        case_id: replace(found.costs[case_id], model_call_s=price.first_call_s)
        if case_id in found.costs
        else price
        for case_id, price in priced.items()
    }
    # a later build's run file: the cases its first build skipped are not planned for
    try:
        skipped = set(skipped_in(state.records.csv_path)) if state.only_build else set()
    # unreadable or not a results file: the first case's open says so, in one line
    except (OSError, ValueError):
        skipped = set()
    costs = {**found.costs, **modelled}
    if not state.extra_build:
        headline = frozenset(state.headline)
        items.sort(key=lambda item: run_order(case_id_of(item), build_of(item), headline, costs))
    entries = planned_entries(state.case_builds, items)
    # build_setup computes it wherever there is a budget
    assert state.deadline_s is not None
    plan = budget_plan(
        state.budget_s,
        state.deadline_s,
        costs,
        entries,
        state.only_build,
        skipped,
        run_startup_s(),
        state.extra_build,
        frozenset(state.headline),
    )
    plan.history_note = found.note() or ""
    return plan


def known_costs(state: RunState) -> History:
    """What the cases cost here before: a later build reads its run's file, where this run's first
    build priced each case here and now; only the first reads this machine's earlier runs (a bounded
    read, once per run: 200 MB of them read again in every build turned a 10 s budget into 20.8
    s)."""
    from gpubench.harness.records.durations import case_costs, history

    machine = state.records.fingerprint_of(state.ctx.device).get("machine_id", "")
    device, profile = str(state.ctx.device), str(state.ctx.profile)
    if state.only_build:
        return case_costs([state.records.csv_path], machine, device, profile, from_history=False)
    return history(state.records.results_dir, machine, device, profile)


def too_slow_to_trust(known: CaseCost | None, budget_s: float, cases: int) -> bool:
    """Whether history says one call of the case takes more than an even split of the budget: then
    the cost model prices it too, and only the model may skip it before a call of its own."""
    return (
        known is not None
        and known.history
        and known.first_call_s is not None
        and known.first_call_s > budget_s / max(cases, 1)
    )


def workload_case(item: pytest.Item) -> tuple[Any, Any]:
    """The item's workload (its module's `gpubench_workload`) and case, or (None, None)."""
    from gpubench.harness.measurement.workload import as_workload

    case = params_of(item).get("case")
    declared = getattr(getattr(item, "module", None), "gpubench_workload", None)
    if case is None or declared is None or not hasattr(case, "case_id"):
        return None, None
    return as_workload(declared), case


def predicted_costs(state: RunState, cases: list[tuple[Any, Any]]) -> dict[str, CaseCost]:
    """The cost model's builds for `cases`, from a probe of this device (about a second; none
    without cases)."""
    from gpubench.harness.budget.cost_model import predicted_build_s
    from gpubench.harness.devices.rates import probe_rates

    if not cases:
        return {}
    rates = probe_rates(state.ctx.device, run_startup_s())
    costs = {}
    for workload, case in cases:
        build_s, call_s = predicted_build_s(
            workload.work(case, state.ctx), rates, state.ctx.timing_for(case.case_id)
        )
        costs[case.case_id] = CaseCost(build_s, call_s, predicted=True)
    return costs


def planned_entries(case_builds: dict[str, int], items: list[pytest.Item]) -> list[tuple[str, int]]:
    """Every (case id, build) of the selection in run order: a process collects its own build of
    each case only but plans for the later ones too; an extra build's number is its own."""
    entries: list[tuple[str, int]] = []
    for item in items:
        case = params_of(item).get("case")
        if "gpubench" not in getattr(item, "fixturenames", ()) or case is None:
            continue
        collected = build_of(item)
        builds = case_builds.get(case.case_id, collected + 1)
        entries += [
            (case.case_id, build)
            for build in (range(builds) if collected < builds else [collected])
        ]
    return list(dict.fromkeys(entries))


def extra_build_order(state: RunState) -> list[str]:
    """The cases an extra build repeats, noisiest first (none without a budget or a readable run
    file)."""
    from gpubench.harness.pytest_plugin.extra_build import noisiest_first
    from gpubench.harness.records.results_reader import read_rows

    if state.budget_s is None:
        return []
    try:
        return noisiest_first(read_rows(state.records.csv_path))
    except (OSError, ValueError):
        return []


def show_plan(config: pytest.Config, plan: BudgetPlan) -> None:
    """The first build process shows the plan and tells gpubench run its promise; a later one, the
    time left for its builds (a compact later build says it in its end line)."""
    first = this_build(config) in (None, 0)
    if first and (answer := answer_writer(config)) is not None:
        answer.promise(plan.promise(), list(plan.left_out))
    if first:
        for line in plan.plan_lines():
            say(config, line)
    elif console_of(config) is None:
        say(config, f"gpubench: {plan.progress()}")


def plan_delivery(plan: BudgetPlan, csv_path: Path) -> list[str]:
    """A plain pytest run's last lines: its plan's promise against the rows it wrote
    (budget.promise)."""
    from gpubench.harness.budget.promise import delivery_lines
    from gpubench.harness.records.results_reader import read_rows

    try:
        rows = read_rows(csv_path) if csv_path.exists() else []
    except (OSError, ValueError):
        rows = []
    return delivery_lines(plan.promise(), list(plan.left_out), rows)


def say(config: pytest.Config, line: str) -> None:
    """A line of the run's own, on pytest's terminal (its own line, not inside a test's progress
    dots)."""
    CONSOLE.show(line)


@contextmanager
def cut_at_run_end(state: RunState | None, test: str) -> Iterator[None]:
    """A test still running past the run's end and its grace is cut: it fails with the reason, and
    no later test starts."""
    if state is None or state.end_s is None or state.budget_s is None:
        yield
        return
    from gpubench.harness.measurement.run_records import RunStop

    try:
        with cut_after(
            state.end_s + grace_s(state.budget_s) - time.time(), cut_reason(state.budget_s)
        ):
            yield
    except DeadlinePassed as cut:
        state.records.stop = state.records.stop or RunStop(f"{test} {cut}", ExitCode.FAILED)
        raise
