"""A `gpubench ab` build that takes turns with its partner (gpubench.harness.processes.turns): the
baton is taken before a case's setup and given after its teardown. Inert unless the build's plan
gives its turns."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from gpubench.harness.processes.turns import TurnPlan, Turns
from gpubench.harness.pytest_plugin.build_answer import answer_writer, plan_of

TURNS = pytest.StashKey[Turns]()
CASE_INDEX = pytest.StashKey[dict[str, int]]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> Generator[None, Any, Any]:
    """Both builds collect before either times a case, and neither writes its files until both ran
    their cases (an interrupted build does not wait: its partner is told it runs alone)."""
    plan = plan_of(session.config)
    text = plan.turns if plan is not None else ""
    if not text or session.config.option.collectonly:
        return (yield)
    answer = answer_writer(session.config)
    if answer is not None:
        # the start-up ends with the collection, before any wait for the partner
        answer.case_starts()
    turns = Turns(TurnPlan.from_text(text)).open()
    session.config.stash[TURNS] = turns
    session.config.stash[CASE_INDEX] = {
        item.nodeid: index for index, item in enumerate(session.items)
    }
    turns.ready()
    finished = False
    try:
        result = yield
        finished = True
        return result
    finally:
        turns.finish(wait=finished)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, Any, Any]:
    turns = item.config.stash.get(TURNS, None)
    if turns is None:
        return (yield)
    case = item.config.stash[CASE_INDEX][item.nodeid]
    turns.before(case)
    try:
        return (yield)
    finally:
        turns.after(case)
