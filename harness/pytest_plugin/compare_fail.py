"""pytest-benchmark's failures at the session's end under the suite: the session ends as it does without gpubench.
pytest-benchmark's `--benchmark-compare-fail` logs its "Performance has regressed" lines, then raises from the
terminal summary, and plain pytest dies of it with exit 1. The suite's session (and a build of `gpubench run` or
`ab`) leaves with its status instead (HeldInterrupt.exit_process), which read 0, and a forked build's exception read
3, pytest's internal error: here the status says it. `--benchmark-histogram` without pygal died the same way, after
two tracebacks of the failed import: here the table is drawn without it, one line names the extra, and exit 1."""

from __future__ import annotations

import sys
from collections.abc import Generator
from typing import Any

import pytest

from gpubench.harness.processes.lifetime import HELD_INTERRUPT
from gpubench.harness.pytest_plugin.modes import is_suite

HISTOGRAM_LINE = ("gpubench: --benchmark-histogram needs pygal, which is not installed: "
                  "pip install 'pytest-benchmark[histogram]'")


def compare_fail_status(session: pytest.Session) -> Generator[None, Any, Any]:
    """The inside of the plugin's pytest_sessionfinish wrapper (`yield from`): the other hooks' result, or exit 1
    instead of pytest-benchmark's exception. A user's run the plugin does not end is left to plain pytest."""
    no_histogram = ends_the_process(session.config) and drop_histogram(session.config)
    try:
        return (yield)
    except Exception as error:
        if not (regressed(error) and ends_the_process(session.config)):
            raise
        failed(session)
        return None
    finally:
        if no_histogram:  # after pytest-benchmark's table, where it would have died
            if session.config.getoption("gpubench_build", None) in (None, 0):  # said once in a run of builds
                sys.stderr.write(HISTOGRAM_LINE + "\n")
            failed(session)


def failed(session: pytest.Session) -> None:
    if session.exitstatus == pytest.ExitCode.OK:  # a graver status (results full, a signal) stands
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def regressed(error: Exception) -> bool:
    """pytest-benchmark's --benchmark-compare-fail verdict (its PerformanceRegression)."""
    from pytest_benchmark.session import PerformanceRegression

    return isinstance(error, PerformanceRegression)


def drop_histogram(config: pytest.Config) -> bool:
    """True when a histogram is asked for, pytest-benchmark would draw it, and pygal is missing; its session's
    `histogram` is then turned off, so its table comes without the failed import. pytest-benchmark draws it under
    its table, which --benchmark-quiet leaves out: a build of `gpubench run` is quiet by gpubench's choice, so there
    the user's histogram is missed all the same."""
    benchmarks = config.pluginmanager.get_plugin("pytest-benchmark")  # its session, registered by that name
    if not getattr(benchmarks, "histogram", None) or not any(getattr(benchmarks, "benchmarks", ())):
        return False
    if getattr(benchmarks, "quiet", False) and not HELD_INTERRUPT.owns_process:
        return False
    try:
        import pytest_benchmark.histogram  # noqa: F401 - what it imports to draw one: pygal, and its ImportError
    except ImportError:
        benchmarks.histogram = False
        return True
    return False


def ends_the_process(config: pytest.Config) -> bool:
    """The suite, or a build of gpubench run or ab: the process leaves with the session's status."""
    return is_suite(config) or HELD_INTERRUPT.owns_process
