"""How the suite's session ends its process: with the status pytest leaves with, which gpubench may
only make graver. The suite's process (and a build of `gpubench run` or `ab`) leaves through
HeldInterrupt.exit_process, Ctrl-C held to the last; the status it leaves with is the one
pytest.main returns, or, where an exception leaves pytest.main (a plugin's terminal summary that
raised, pytest-benchmark's `--benchmark-compare-fail` verdict), the traceback and the status Python
gives a program that exception ends. `--benchmark-histogram` without pygal died of its failed import
after two tracebacks: here the table is drawn without it, one line names the extra, and exit 1."""

from __future__ import annotations

import atexit
import sys
import warnings
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
from pytest_benchmark.logger import PytestBenchmarkWarning

from gpubench.harness.core.console import CONSOLE
from gpubench.harness.core.exits import StopSignal
from gpubench.harness.processes.lifetime import HELD_INTERRUPT
from gpubench.harness.pytest_plugin.build_answer import this_build
from gpubench.harness.pytest_plugin.modes import is_suite

HISTOGRAM_LINE = (
    "gpubench: --benchmark-histogram needs pygal, which is not installed: "
    "pip install 'pytest-benchmark[histogram]'"
)
# set at unconfigure: the process leaves through exit_process
ENDS_PROCESS = pytest.StashKey[bool]()
# pytest-benchmark's warning, a regex
NOT_SAVING = "Not saving anything, no benchmarks have been run"
# Python's status for a program an exception ended
UNCAUGHT = 1


def check_compare(config: pytest.Config) -> None:
    """A --benchmark-compare that names a JSON file not there: pytest-benchmark raised ValueError
    for a path of more than two parts (an INTERNALERROR of 40 lines) and matched nothing for a
    shorter one ('x.json' becomes the glob 'x.json*.json'). One line naming the fix instead."""
    try:
        given = config.getoption("benchmark_compare")
    # pytest-benchmark not loaded (-p no:benchmark): nothing compares
    except ValueError:
        return
    if not isinstance(given, str) or Path(given).is_file():
        return
    # pytest-benchmark's own glob of saved runs
    if Path(given).suffix != ".json" and len(Path(given).parts) <= 2:
        return
    raise pytest.UsageError(
        f"--benchmark-compare {given}: no such file — pass an existing pytest-benchmark JSON "
        "file, or a saved run's number or id in --benchmark-storage (e.g. "
        "--benchmark-compare=0001)"
    )


def histogram_status(session: pytest.Session) -> Generator[None, Any, Any]:
    """The inside of the plugin's pytest_sessionfinish wrapper (`yield from`): the other hooks'
    result, with exit 1 and one line where the histogram could not be drawn; pytest-benchmark's "Not
    saving anything" left unsaid. A user's run the plugin does not end is left to plain pytest."""
    # the suite, or a build of gpubench run or ab: the process leaves with the session's status
    no_histogram = (is_suite(session.config) or HELD_INTERRUPT.owns_process) and drop_histogram(
        session.config
    )
    try:
        # a session that measured nothing says so itself: the end line, run's exit
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=NOT_SAVING, category=PytestBenchmarkWarning)
            return (yield)
    finally:
        # after pytest-benchmark's table, where it would have died
        if no_histogram:
            # said once in a run of builds
            if this_build(session.config) in (None, 0):
                CONSOLE.show_error(HISTOGRAM_LINE)
            # a graver status (results full, a signal) stands
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED


def drop_histogram(config: pytest.Config) -> bool:
    """True when a histogram is asked for, pytest-benchmark would draw it, and pygal is missing; its
    session's `histogram` is then turned off, so its table comes without the failed import.
    pytest-benchmark draws it under its table, which --benchmark-quiet leaves out: a build of
    `gpubench run` is quiet by gpubench's choice, so there the user's histogram is missed all the
    same."""
    # its session, registered by that name
    benchmarks = config.pluginmanager.get_plugin("pytest-benchmark")
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


def end_session_interrupts(config: pytest.Config, session: pytest.Session) -> None:
    """A Ctrl-C held while the session ended makes it interrupted (2) unless a graver status stands.
    pytest as this process's command holds Ctrl-C until it leaves (process_status); embedded,
    Python's handler is given back."""
    ended = HELD_INTERRUPT.pending
    HELD_INTERRUPT.pending = False
    if ended and session.exitstatus in (
        pytest.ExitCode.OK,
        pytest.ExitCode.TESTS_FAILED,
        pytest.ExitCode.NO_TESTS_COLLECTED,
    ):
        session.exitstatus = pytest.ExitCode.INTERRUPTED
    own_command = (
        list(config.invocation_params.args) == sys.argv[1:] and not config.invocation_params.plugins
    )
    if own_command or HELD_INTERRUPT.owns_process:
        config.stash[ENDS_PROCESS] = True
    else:
        HELD_INTERRUPT.release()


def process_status(config: pytest.Config) -> Generator[None, Any, Any]:
    """The inside of the plugin's outermost pytest_cmdline_main wrapper (`yield from`), after every
    hook of the run and unconfigure: the process leaves with what pytest.main returns, or with what
    the exception leaving it would have ended the program with (its traceback printed as Python
    prints it). The session's status read 0 there, and a build forked from the fork server read
    3."""
    try:
        status = yield
    # pytest.main says it in one line and returns 4 (a refused option, set up at configure)
    except pytest.UsageError:
        raise
    # a SystemExit goes on: Python ends the program with its code, as without gpubench
    except Exception as error:
        if not leaves_process(config):
            raise
        sys.excepthook(type(error), error, error.__traceback__)
        status = UNCAUGHT
    # a signal during the session's end: never a success
    except KeyboardInterrupt as error:
        if not leaves_process(config):
            raise
        status = error.code if isinstance(error, StopSignal) else pytest.ExitCode.INTERRUPTED
    if config.stash.get(ENDS_PROCESS, False):
        atexit.register(HELD_INTERRUPT.exit_process, int(status))
    return status


def leaves_process(config: pytest.Config) -> bool:
    """pytest is this process's command: the suite's (set at unconfigure), or a build of gpubench
    run or ab, whose pytest.main returns to build_main, never to a caller that could take an
    exception."""
    return config.stash.get(ENDS_PROCESS, False) or HELD_INTERRUPT.owns_process
