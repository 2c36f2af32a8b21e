"""A build's side of its plan: the plan found, its output names and selection applied to pytest's
parsed options before pytest-benchmark and the mark plugin read them (--benchmark-json alone is
tagged before parsing, in build_main), and the answer sent back to `gpubench run`."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gpubench.harness.processes.protocol import BuildAnswer, BuildPlan, write_message
from gpubench.harness.processes.started import process_started_s
from gpubench.harness.pytest_plugin.benchmark_json import json_path, json_value

# The micro-benchmarks (matmul, elementwise, transfer, inference, conv2d, selfcheck, speedup): what
# --device cuda:all runs on each GPU.
MICRO_MARKEXPR = "not slow and not training and not distributed"


def add_build_options(group: Any) -> None:
    """A plain pytest run of one build of each case; a build `gpubench run` starts gets its plan
    instead."""
    group.addoption(
        "--gpubench-build",
        type=int,
        default=None,
        dest="gpubench_build",
        help="run only build K of each case, appending to the run's CSV "
        "(gpubench run: one process per build)",
    )


PLAN = pytest.StashKey["BuildPlan | None"]()


def plan_of(config: pytest.Config) -> BuildPlan | None:
    """The plan of a build `gpubench run` or `ab` started (build_main registers it with pytest);
    None in a plain pytest run."""
    if PLAN not in config.stash:
        plans = [
            plugin for plugin in config.pluginmanager.get_plugins() if isinstance(plugin, BuildPlan)
        ]
        config.stash[PLAN] = plans[0] if plans else None
    return config.stash[PLAN]


def this_build(config: pytest.Config) -> int | None:
    """The build of each case this process runs: its plan's, or a plain run's --gpubench-build
    (None: every one)."""
    plan = plan_of(config)
    return plan.build if plan is not None else config.getoption("gpubench_build", None)


def apply_build_options(config: pytest.Config) -> None:
    """One build's view of the user's options: timed cases only (unless timing is off), its own
    output names (else each build overwrites the last), pytest-benchmark's JSON kept for the run's
    table, micro cases under cuda:all."""
    plan, option = plan_of(config), config.option
    if plan is None:
        return
    if getattr(option, "benchmark_skip", False):
        # the run's builds time cases only: skipping every timed one would run nothing and say so
        # nowhere
        raise pytest.UsageError(
            "--benchmark-skip skips every case gpubench run times — drop it (select cases with "
            "-k or -m)"
        )
    untimed = getattr(option, "benchmark_disable", False) and not getattr(
        option, "benchmark_enable", False
    )
    if hasattr(option, "benchmark_only") and not untimed:
        # pytest-benchmark refuses --benchmark-only with --benchmark-disable
        option.benchmark_only = True
    if plan.output_tag and getattr(option, "benchmark_save", None):
        option.benchmark_save = f"{option.benchmark_save}-{plan.output_tag}"
    if plan.table_json and hasattr(option, "benchmark_json") and not option.benchmark_json:
        option.benchmark_json = json_value(Path(plan.table_json))
    if plan.micro_only:
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
    # the budget plan's headline cases funded whole, and those it left out: the run checks delivery
    # against them
    promised: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)

    def promise(self, promised: list[str], left_out: list[str]) -> None:
        self.promised, self.left_out = list(promised), list(left_out)
        self.send(
            BuildAnswer(self.build, self.builds, promised=self.promised, left_out=self.left_out)
        )

    def case_starts(self, case: str = "") -> None:
        """A case's setup: the first says how long this process took to get here since it started;
        each named one is sent, so a run that cuts this build from outside can say which case it was
        in."""
        if self.startup_s is None:
            self.startup_s = max(0.0, time.time() - process_started_s())
        if case:
            self.send(
                BuildAnswer(
                    self.build,
                    self.builds,
                    startup_s=self.startup_s,
                    case=case,
                    promised=self.promised,
                    left_out=self.left_out,
                )
            )

    def collected(self, builds: int) -> None:
        self.builds = builds
        self.send(BuildAnswer(self.build, builds))

    def case_phase(self, report: pytest.TestReport) -> None:
        test_id = report.nodeid.rpartition("::")[2]
        self.case_cost_s[test_id] = self.case_cost_s.get(test_id, 0.0) + float(report.duration)

    def finish(
        self, config: pytest.Config, exit_code: int, rows_written: int, notes: list[str]
    ) -> None:
        path = json_path(getattr(config.option, "benchmark_json", None))
        written = str(path) if path is not None and path.is_file() else ""
        self.send(
            BuildAnswer(
                self.build,
                self.builds,
                rows_written,
                dict(self.case_cost_s),
                exit_code,
                written,
                bool(getattr(config.option, "benchmark_verbose", False)),
                self.startup_s,
                notes,
                promised=self.promised,
                left_out=self.left_out,
            )
        )
        os.close(self.fd)

    def send(self, answer: BuildAnswer) -> None:
        try:
            write_message(self.fd, answer)
        # the launcher is gone: it reads no answer, and its end stops this build anyway
        except OSError:
            pass


ANSWER = pytest.StashKey[AnswerWriter]()


def answer_writer(config: pytest.Config) -> AnswerWriter | None:
    if ANSWER not in config.stash:
        plan = plan_of(config)
        if plan is None or plan.answer_fd is None:
            return None
        config.stash[ANSWER] = AnswerWriter(plan.answer_fd, plan.build)
    return config.stash[ANSWER]
