"""The `gpubench` fixture: one build of a case through the harness, its row recorded, and the same
samples in pytest-benchmark's table (through its public API: `pedantic`, `extra_info`)."""

from __future__ import annotations

import time
from typing import Any, NoReturn
from collections.abc import Callable, Mapping

import pytest
from pytest_benchmark.stats import Stats

from gpubench.harness.core.flags import CAPPED, has_flag
from gpubench.harness.measurement.loop import inline_rounds
from gpubench.harness.measurement.measure import Rounds
from gpubench.harness.catalog.profiles import Profile
from gpubench.harness.core.exits import ExitCode, StopSignal, UsageError
from gpubench.harness.core.plan import RoundPlan
from gpubench.harness.records.results import ResultsFull
from gpubench.harness.pytest_plugin.benchmark_entries import enter_build
from gpubench.harness.pytest_plugin.budget_hooks import say
from gpubench.harness.pytest_plugin.build_answer import answer_writer
from gpubench.harness.pytest_plugin.console import Console, console_of, steps_text
from gpubench.harness.pytest_plugin.extra_build import EXTRA_BUILD_SKIP
from gpubench.harness.pytest_plugin.run_state import RunState
from gpubench.harness.measurement.runner import run_case
from gpubench.harness.workloads.common.process_warm_up import warm_once
from gpubench.harness.records.safe_files import RefusedPath
from gpubench.harness.records.schema import RUN_COLUMNS, SchemaError
from gpubench.harness.measurement.run_records import RunStop
from gpubench.harness.measurement.terminal import summary_line
from gpubench.harness.measurement.user_bench import Figures, user_workload
from gpubench.harness.measurement.workload import as_workload


def benchmark_rounds(benchmark: Any) -> Rounds:
    """pytest-benchmark drives the rounds (timed by the synced clock), so its table and JSON hold
    the row's samples. `pedantic` calls the function once more after the rounds when iterations > 1
    (for the result): counted."""

    def run(fn: Callable[[], Any], plan: RoundPlan) -> tuple[list[float], Any, int]:
        try:
            result = benchmark.pedantic(
                fn, rounds=plan.rounds, iterations=plan.iterations, warmup_rounds=0
            )
        except BaseException:
            # pedantic marks only an Exception: rounds cut by the budget (DeadlinePassed) or a
            # signal left stats with no sample, whose min() was a 75-line traceback at the session's
            # end
            benchmark.has_error = True
            raise
        return (
            list(benchmark.stats.stats.data),
            result,
            plan.rounds * plan.iterations + (plan.iterations > 1),
        )

    return run


class Recorder:
    def __init__(
        self,
        state: RunState,
        benchmark: Any,
        request: pytest.FixtureRequest,
        build: int,
        benchmark_times: bool = True,
    ) -> None:
        self.state, self.benchmark, self.request, self.build = state, benchmark, request, build
        # pytest-benchmark's fixture drives one measurement per test, and only with the synced clock
        # as its timer; the harness drives every other (inline_rounds, the same clock)
        self._driven = not benchmark_times

    @property
    def console(self) -> Console | None:
        """The run's compact console (a build of `gpubench run` or `ab` with no -v), else None."""
        return console_of(self.request.config)

    @property
    def device(self) -> Any:
        """The run's torch.device (--gpubench-device; auto: cuda > mps > cpu): build the model
        there."""
        return self.state.ctx.device

    def progress(self, message: str) -> None:
        """A line on the terminal even while pytest captures output (long cases report here)."""
        say(self.request.config, f"  gpubench: {message}")

    def _step_progress(self, case_id: str) -> Callable[[int, int], None]:
        start_s = time.monotonic()
        return lambda done, total: self.progress(
            steps_text(case_id, done, total, time.monotonic() - start_s)
        )

    def _stop(self, stop: RunStop, why: str) -> NoReturn:
        self.state.records.stop = stop
        pytest.skip(f"not recorded: {why}")

    def _open(self) -> None:
        try:
            self.state.records.open()
        except ResultsFull as full:
            self._stop(RunStop(str(full), ExitCode.RESULTS_FULL), "the results folder is full")
        # another run with this --run-id started at the same moment
        except FileExistsError as taken:
            self._stop(
                RunStop(
                    f"{taken.filename} was created by another run meanwhile — pass another "
                    "--run-id",
                    int(pytest.ExitCode.USAGE_ERROR),
                ),
                "another run took this run id",
            )
        # a later build appending to a file another version wrote, or a damaged one
        except SchemaError as damaged:
            self._stop(
                RunStop(str(damaged), int(pytest.ExitCode.USAGE_ERROR)),
                "the run's file cannot be appended to",
            )
        # a link planted at the run's file (RefusedPath: its own line), no descriptor left
        except OSError as error:
            line = (
                str(error)
                if isinstance(error, RefusedPath)
                else (
                    f"{self.state.records.csv_path} cannot be written ({error.strerror or error}) "
                    "— fix that, then re-run"
                )
            )
            self._stop(
                RunStop(line, int(pytest.ExitCode.USAGE_ERROR)), "the run's file cannot be written"
            )

    def run(self, case: Any) -> dict[str, Any]:
        """One build (the parametrized one) of a case of the bench module's workload."""
        return self._run(case, as_workload(self.request.module.gpubench_workload), self.build)

    def measure(
        self,
        fn: Callable[[], Any] | None = None,
        *,
        name: str,
        params: Mapping[str, Any] | None = None,
        work: Mapping[str, float] | None = None,
        figures: Figures | None = None,
        setup: Callable[[], Callable[[], Any]] | None = None,
        builds: int | None = None,
    ) -> list[dict[str, Any]]:
        """Time `fn`, or what `setup()` returns (a fresh model per build), through the harness; one
        row per build."""
        if (fn is None) == (setup is None):
            raise UsageError(
                "measure() takes the function to time, or setup= returning it — pass one of them"
            )
        if setup is None and builds not in (None, 1):
            raise UsageError(
                f"builds={builds!r} needs setup= (a function returning a fresh callable per "
                "build) — one callable timed again is not an independent build"
            )
        # a fresh model per build: --gpubench-builds, else the profile's count
        if builds is None:
            builds = (
                1
                if setup is None
                else self.state.ctx.builds or Profile(self.state.ctx.profile).default_builds
            )
        case, workload = user_workload(name, params, setup or (lambda: fn), work, figures, builds)
        return [self._run(case, workload, build) for build in self._builds_here(name, builds)]

    def _builds_here(self, name: str, builds: int) -> list[int]:
        """The builds of a gpubench.measure() this process makes: every one under plain pytest;
        build K alone in a build process K (gpubench ab's pairs, gpubench run's builds, an extra
        build of a case built more than once), as a suite case's. Under gpubench run the first build
        process's answer asks for the builds this test makes."""
        only = self.state.only_build
        if only is None:
            return list(range(builds))
        answer = answer_writer(self.request.config)
        if only == 0 and answer is not None and self.state.ctx.builds is None:
            # read by gpubench run at this build's end
            answer.builds = max(answer.builds or 1, builds)
        if (
            only < builds
            or self.state.ctx.builds is not None
            or (self.state.extra_build and builds > 1)
        ):
            return [only]
        pytest.skip(f"{name}: measured in {builds} build(s); this is build {only + 1}")

    def _run(self, case: Any, workload: Any, build: int) -> dict[str, Any]:
        records, untimed = self.state.records, self.benchmark.disabled
        self.benchmark.group = case.workload
        if not untimed:
            # a later build's records read the cases its first build skipped
            self._open()
        plan = self.state.budget_plan
        if build > 0 and case.case_id in records.skipped:
            if plan is not None:
                plan.done(case.case_id, skipped=True)
            # its first build already left the row
            pytest.skip(records.skipped[case.case_id])
        if plan is not None and plan.extra and not plan.fits(case.case_id):
            plan.done(case.case_id, skipped=False)
            # it has the profile's builds already: no row
            pytest.skip(EXTRA_BUILD_SKIP)
        ctx = self.state.context(build)
        ctx.share = plan.share_for(case.case_id) if plan is not None and not untimed else None
        ctx.progress = (
            self._step_progress(case.case_id)
            if self.request.config.getoption("verbose") > 0
            else (self.console.step_progress(case.case_id) if self.console is not None else None)
        )
        # pytest-benchmark's fixture drives one measurement per test: the first
        if not self._driven:
            self.benchmark.extra_info.update(
                {
                    "case_id": case.case_id,
                    "build": build,
                    **{k: v for k, v in case.settings().items() if v is not None},
                }
            )
        row: dict[str, Any] | None = None
        try:
            # what a later case finds done by the ones before it, done before the first
            if not untimed:
                warm_once(ctx.device, workers=bool(getattr(case, "num_workers", None)))
            rounds = inline_rounds(ctx.clock) if self._driven else benchmark_rounds(self.benchmark)
            base = records.base_row() if not untimed else {"run_id": records.run_id}
            row = run_case(
                case,
                workload,
                ctx,
                base,
                records.record if not untimed else None,
                rounds=rounds,
                untimed=untimed,
            )
        # the disk is full: every row so far is whole; stop cleanly
        except ResultsFull as full:
            self._stop(RunStop(str(full), ExitCode.RESULTS_FULL), "the results folder is full")
        # Ctrl-C, or SIGTERM/SIGHUP (StopSignal): the case unwound
        except KeyboardInterrupt as stopped:
            # rounds cut short: pytest-benchmark's JSON would fail on them
            self.benchmark.has_error = True
            if not isinstance(stopped, StopSignal):
                raise
            # The rest do not run. Not re-raised: pytest's report of an interrupt can crash on a
            # frame inside torch the signal's name
            pytest.skip(f"not recorded: {str(stopped).split(':')[0]}")
        finally:
            self.state.release_device_data()
            # a case that raised is done too: no time is kept for it
            if plan is not None:
                plan.done(
                    case.case_id, row is not None and row["status"] == "skipped", *build_taken(row)
                )
        # every other way out of the try skipped or raised
        assert row is not None
        first, self._driven = not self._driven, True
        return self._report(case, row, untimed, first)

    def _report(
        self, case: Any, row: dict[str, Any], untimed: bool, first: bool = True
    ) -> dict[str, Any]:
        if untimed and row["status"] == "ok":
            self.state.untimed_cases += 1
            if first:
                # marks the fixture used (the untimed call was made): no warning per case
                self.benchmark(lambda: None)
            return row
        # pytest-benchmark's table and JSON hold the test's first measurement; the CSV holds every
        # one
        if first:
            self.benchmark.extra_info.update(
                {
                    k: v
                    for k, v in row.items()
                    if k not in RUN_COLUMNS
                    and k != "samples_s"
                    and v is not None
                    and isinstance(v, (int, float, str, bool))
                }
            )
        if row["status"] == "ok" and first:
            show_row_samples(self.benchmark, row.get("samples_s") or [])
        # pytest-benchmark's view of a case is one entry: its builds' samples together
        if row["status"] == "ok":
            enter_build(
                self.request.config,
                self.benchmark,
                int(row.get("build") or 0),
                row.get("samples_s") or [],
                getattr(case, "test_id", None),
                own=first,
            )
        plan = self.state.budget_plan
        if self.request.config.getoption("verbose") > 0 and not untimed:
            self.progress(summary_line(row) + (f" [{plan.progress()}]" if plan is not None else ""))
        elif self.console is not None and not untimed:
            self.console.case_done(row, plan.time_left() if plan is not None else None)
        if row["status"] == "skipped":
            self.state.records.skipped[case.case_id] = row["reason"]
            pytest.skip(row["reason"])
        # kept in the CSV; its one call is no time to target, nor pytest-benchmark's
        if row["status"] == "unreached":
            self.benchmark.has_error = True
            pytest.skip(row["reason"])
        if row["status"] == "oom":
            pytest.skip(f"out of memory: {row['reason']}")
        # e.g. diverged: recorded, and the test says so
        if row["status"] == "failed":
            pytest.fail(row["reason"], pytrace=False)
        return row


def build_taken(row: dict[str, Any] | None) -> tuple[float | None, float | None]:
    """(a whole build's seconds, its first call's seconds) for the plan's pace: a capped build ran
    short of its price by design and tells nothing of it."""
    if row is None:
        return None, None
    whole = row["status"] == "ok" and not has_flag(row.get("flags"), CAPPED)
    first_call_s = row.get("first_call_s")
    # a refused call ran whole; an unreached one was stopped at its share: its seconds are a floor,
    # not a cost
    refused = row["status"] == "skipped" and isinstance(first_call_s, float)
    return (row.get("build_s") if whole else None), (first_call_s if refused else None)


def show_row_samples(benchmark: Any, samples_s: list[float]) -> None:
    """Show the row's own samples (DDP step times, an epoch's windows) in pytest-benchmark's table,
    which timed one whole call and would disagree with the CSV by orders of magnitude: with no API
    for it, `stats` is replaced."""
    metadata = getattr(benchmark, "stats", None)
    if metadata is None or not samples_s or list(metadata.stats.data) == list(samples_s):
        return
    shown = Stats()
    for seconds in samples_s:
        shown.update(seconds)
    metadata.stats = shown
    benchmark.extra_info["samples"] = "the workload's own samples (per step), as in the CSV row"
