"""A build's side of its plan: the build's own pytest options, applied to pytest's parsed options before
pytest-benchmark and the mark plugin read them (--benchmark-json alone is tagged before parsing, in build_main),
and the answer sent back to `gpubench run`."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gpubench.harness.processes.protocol import BuildAnswer, write_message
from gpubench.harness.pytest_plugin.benchmark_json import json_path, json_value

# The micro-benchmarks (matmul, elementwise, transfer, inference, conv2d, selfcheck, speedup): what
# --device cuda:all runs on each GPU.
MICRO_MARKEXPR = "not slow and not training and not distributed"


def add_build_options(group: Any) -> None:
    """Internal: the build `gpubench run` starts, its answer's pipe, and how the user's outputs and selection adapt."""
    group.addoption("--gpubench-build", type=int, default=None, dest="gpubench_build",
                    help="run only build K of each case, appending to the run's CSV "
                    "(gpubench run: one process per build)")
    group.addoption("--gpubench-answer-fd", type=int, default=None, dest="gpubench_answer_fd", help=argparse.SUPPRESS)
    group.addoption("--gpubench-output-tag", default="", dest="gpubench_output_tag", help=argparse.SUPPRESS)
    group.addoption("--gpubench-table-json", default="", dest="gpubench_table_json", help=argparse.SUPPRESS)
    group.addoption("--gpubench-timed-only", action="store_true", default=False, dest="gpubench_timed_only",
                    help=argparse.SUPPRESS)
    group.addoption("--gpubench-micro-only", action="store_true", default=False, dest="gpubench_micro_only",
                    help=argparse.SUPPRESS)
    # a build of a `gpubench ab` pair that takes turns with its partner: gpubench.harness.pytest_plugin.turns
    group.addoption("--gpubench-turns", default="", dest="gpubench_turns", help=argparse.SUPPRESS)
    # with --gpubench-build K past the profile's builds: gpubench.harness.pytest_plugin.extra_build
    group.addoption("--gpubench-extra-build", action="store_true", default=False, dest="gpubench_extra_build",
                    help=argparse.SUPPRESS)


def apply_build_options(config: pytest.Config) -> None:
    """One build's view of the user's options: timed cases only (unless timing is off), its own output names (else
    each build overwrites the last), pytest-benchmark's JSON kept for the run's table, micro cases under cuda:all."""
    option = config.option
    if getattr(option, "benchmark_skip", False) and config.getoption("gpubench_timed_only"):
        # the run's builds time cases only: skipping every timed one would run nothing and say so nowhere
        raise pytest.UsageError("--benchmark-skip skips every case gpubench run times — drop it (select cases with "
                                "-k or -m)")
    untimed = getattr(option, "benchmark_disable", False) and not getattr(option, "benchmark_enable", False)
    if config.getoption("gpubench_timed_only") and hasattr(option, "benchmark_only") and not untimed:
        option.benchmark_only = True  # pytest-benchmark refuses --benchmark-only with --benchmark-disable
    tag = config.getoption("gpubench_output_tag")
    if tag and getattr(option, "benchmark_save", None):
        option.benchmark_save = f"{option.benchmark_save}-{tag}"
    table_json = config.getoption("gpubench_table_json")
    if table_json and hasattr(option, "benchmark_json") and not option.benchmark_json:
        option.benchmark_json = json_value(Path(table_json))
    if config.getoption("gpubench_micro_only"):
        user = getattr(option, "markexpr", "")
        option.markexpr = f"({user}) and ({MICRO_MARKEXPR})" if user else MICRO_MARKEXPR


@dataclass
class AnswerWriter:
    """The answer as it grows: sent once the collection knows the build count, again at the end."""

    fd: int
    build: int
    builds: int | None = None
    case_cost_s: dict[str, float] = field(default_factory=dict)
    startup_s: float | None = None

    def case_starts(self, case: str = "") -> None:
        """A case's setup: the first says how long this process took to get here since it started; each named one
        is sent, so a run that cuts this build from outside can say which case it was in."""
        if self.startup_s is None:
            import time

            from gpubench.harness.processes.started import process_started_s

            self.startup_s = max(0.0, time.time() - process_started_s())
        if case:
            self.send(BuildAnswer(self.build, self.builds, startup_s=self.startup_s, case=case))

    def collected(self, builds: int) -> None:
        self.builds = builds
        self.send(BuildAnswer(self.build, builds))

    def case_phase(self, report: pytest.TestReport) -> None:
        test_id = report.nodeid.rpartition("::")[2]
        self.case_cost_s[test_id] = self.case_cost_s.get(test_id, 0.0) + float(report.duration)

    def finish(self, config: pytest.Config, exit_code: int, rows_written: int, notes: list[str]) -> None:
        path = json_path(getattr(config.option, "benchmark_json", None))
        written = str(path) if path is not None and path.is_file() else ""
        self.send(BuildAnswer(self.build, self.builds, rows_written, dict(self.case_cost_s), exit_code, written,
                              bool(getattr(config.option, "benchmark_verbose", False)), self.startup_s, notes))
        os.close(self.fd)

    def send(self, answer: BuildAnswer) -> None:
        try:
            write_message(self.fd, answer)
        except OSError:  # the launcher is gone: it reads no answer, and its end stops this build anyway
            pass


ANSWER = pytest.StashKey[AnswerWriter]()


def answer_writer(config: pytest.Config) -> AnswerWriter | None:
    if ANSWER not in config.stash:
        fd = config.getoption("gpubench_answer_fd")
        if fd is None:
            return None
        config.stash[ANSWER] = AnswerWriter(fd, int(config.getoption("gpubench_build") or 0))
    return config.stash[ANSWER]
