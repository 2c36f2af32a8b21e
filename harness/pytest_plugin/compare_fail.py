"""pytest-benchmark's `--benchmark-compare-fail` under the suite: the session ends as it does without gpubench.
pytest-benchmark logs its "Performance has regressed" lines, then raises from the terminal summary, and plain pytest
dies of it with exit 1. The suite's session (and a build of `gpubench run` or `ab`) leaves with its status instead
(HeldInterrupt.exit_process), which read 0, and a forked build's exception read 3, pytest's internal error: here
the status says it."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from gpubench.harness.processes.lifetime import HELD_INTERRUPT
from gpubench.harness.pytest_plugin.modes import is_suite


def compare_fail_status(session: pytest.Session) -> Generator[None, Any, Any]:
    """The inside of the plugin's pytest_sessionfinish wrapper (`yield from`): the other hooks' result, or exit 1
    instead of pytest-benchmark's exception. A user's run the plugin does not end is left to plain pytest."""
    try:
        return (yield)
    except Exception as error:
        if not (regressed(error) and ends_the_process(session.config)):
            raise
        if session.exitstatus == pytest.ExitCode.OK:  # a graver status (results full, a signal) stands
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        return None


def regressed(error: Exception) -> bool:
    """pytest-benchmark's --benchmark-compare-fail verdict (its PerformanceRegression)."""
    from pytest_benchmark.session import PerformanceRegression

    return isinstance(error, PerformanceRegression)


def ends_the_process(config: pytest.Config) -> bool:
    """The suite, or a build of gpubench run or ab: the process leaves with the session's status."""
    return is_suite(config) or HELD_INTERRUPT.owns_process
