"""A build process's one entry: `--plan-fd=R --answer-fd=W` (plan in, answer out; a fork server's
builds enter at `run_from_fds`). It starts with SIGINT blocked, so a Ctrl-C during start-up and
imports is held and raised at the session's first hook instead of a traceback from an import."""

from __future__ import annotations

import argparse
import signal
import sys
from dataclasses import replace

from gpubench.harness.core.pytest_args import option_value, with_tagged_json
from gpubench.harness.core.exits import BUILD_INTERRUPTED, ExitCode, UsageError
from gpubench.harness.processes.lifetime import HELD_INTERRUPT
from gpubench.harness.processes.protocol import BuildPlan, ProtocolError, read_plan
from gpubench.harness.processes.standard_streams import guard_standard_streams
from gpubench.harness.core.console import CONSOLE


def pytest_args_of(plan: BuildPlan) -> list[str]:
    """The suite's pytest arguments, then the user's (their --benchmark-json tagged); gpubench's own
    options are no pytest argument: the plugin reads them from the plan itself."""
    return [*plan.suite_args, *with_tagged_json(plan.pytest_args, plan.output_tag)]


def check_timer(pytest_args: list[str]) -> None:
    """One line instead of pytest-benchmark's traceback when --benchmark-timer cannot be loaded."""
    import importlib

    name = option_value(pytest_args, "--benchmark-timer")
    if name is None:
        return
    module, _, attr = name.rpartition(".")
    try:
        getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as error:
        raise UsageError(
            f"--benchmark-timer {name!r} cannot be loaded ({error}) — pass a dotted name such as "
            "time.perf_counter"
        ) from None


def run_pytest(plan: BuildPlan) -> int:
    """pytest as this process's command, the plan registered as a plugin object for the gpubench
    plugin to find: it leaves with the session's status (HeldInterrupt)."""
    import pytest

    args = pytest_args_of(plan)
    try:
        check_timer(args)
    except UsageError as error:
        CONSOLE.error(str(error))
        return int(ExitCode.REFUSED)
    HELD_INTERRUPT.owns_process = True
    # a closed pipe ends no build in pytest's terminal writer
    guard_standard_streams()
    # the gpubench plugin comes from the suite's configuration
    code = int(pytest.main(args, plugins=[plan]))
    # a Ctrl-C held while pytest never reached its session (a usage error first) is still an
    # interrupt
    return BUILD_INTERRUPTED if HELD_INTERRUPT.pending and code in (0, 1, 5) else code


def run_from_fds(plan_fd: int, answer_fd: int) -> int:
    try:
        plan = read_plan(plan_fd)
    except (OSError, ProtocolError) as error:
        CONSOLE.error(
            f"this build's plan cannot be read ({error}): start builds through gpubench run"
        )
        return int(ExitCode.INTERNAL)
    return run_pytest(replace(plan, answer_fd=answer_fd))


def main() -> int:
    HELD_INTERRUPT.hold()
    # a pending Ctrl-C arrives here, held
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    own = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    own.add_argument("--plan-fd", type=int)
    own.add_argument("--answer-fd", type=int)
    fds, rest = own.parse_known_args(sys.argv[1:])
    if fds.plan_fd is None or fds.answer_fd is None or rest:
        CONSOLE.error(
            "a build process takes only --plan-fd and --answer-fd: start builds through "
            "gpubench run or gpubench ab"
        )
        return int(ExitCode.REFUSED)
    return run_from_fds(fds.plan_fd, fds.answer_fd)


if __name__ == "__main__":
    sys.exit(main())
