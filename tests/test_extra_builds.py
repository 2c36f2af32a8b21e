"""Extra builds: after the profile's builds, a run under --budget spends its time left on more
builds of the repeated cases whose builds disagree most, each only if its whole build still fits."""

import time

import pytest
from runs import ONE_CASE_BENCH, run_build_process

from gpubench.harness.commands.budget_builds import ExtraBuilds
from gpubench.harness.core.options import RunOptions
from gpubench.harness.budget.shares import CaseCost
from gpubench.harness.processes.build_runs import run_builds
from gpubench.harness.processes.launch import NO_TESTS, Completed, Job
from gpubench.harness.processes.protocol import BuildAnswer, BuildPlan
from gpubench.harness.budget.plan import BudgetPlan
from gpubench.harness.pytest_plugin.extra_build import build_spread, noisiest_first
from gpubench.harness.records.results import ResultsWriter
from gpubench.harness.records.results_reader import read_rows
from gpubench.harness.records.schema import SCHEMA_VERSION

pytest_plugins = ["pytester"]


def row(case_id, build, median_s, status="ok", builds=3, build_s=2.0):
    return {
        "case_id": case_id,
        "build": build,
        "builds": builds,
        "status": status,
        "median_s": median_s,
        "build_s": build_s,
    }


def test_the_case_whose_builds_disagree_most_is_repeated_first_and_an_unmeasured_one_not_at_all():
    rows = [
        row("calm", 0, 1.0),
        row("calm", 1, 1.01),
        row("wild", 0, 1.0),
        row("wild", 1, 1.5),
        row("half", 0, 2.0),
        row("half", 1, 2.2),
        row("broke", 0, 1.0),
        row("broke", 1, None, status="failed"),
        row("once", 0, 1.0, builds=1),
    ]
    # an epoch built once by the profile is not repeated
    assert noisiest_first(rows) == ["wild", "half", "calm"]
    assert build_spread([1.0, 1.5]) == pytest.approx(0.4)


def test_an_extra_build_runs_a_case_whole_or_not_at_all():
    now = [100.0]
    plan = BudgetPlan(
        180.0,
        110.0,
        {"a": CaseCost(4.0), "b": CaseCost(20.0)},
        [("a", 3), ("b", 3), ("c", 3)],
        now=lambda: now[0],
        extra=True,
    )
    # c: no cost known, nothing says it fits
    assert plan.fits("a") and not plan.fits("b") and not plan.fits("c")
    # all that is left, not a split with the cases after it
    assert plan.share_for("a").share_s == pytest.approx(10.0)
    now[0] = 106.0
    assert not plan.fits("a")
    tiny = BudgetPlan(
        180.0, 110.1, {"a": CaseCost(0.01)}, [("a", 3)], now=lambda: now[0] + 4.0, extra=True
    )
    # 0.1 s left: too little to build any case, however cheap its history says it is
    assert not tiny.fits("a")


def write_rows(folder, rows):
    folder.mkdir(exist_ok=True)
    writer = ResultsWriter(folder, "r")
    for one in rows:
        writer.append(
            {
                "schema_version": SCHEMA_VERSION,
                "run_id": "r",
                "timestamp_utc": "2026-11-02T10:00:00+00:00",
                "machine_id": "m",
                "hostname": "h",
                "device": "cpu",
                "device_name": "x",
                "torch_version": "2",
                "cuda_version": "",
                "workload": "matmul",
                "reason": "",
                **one,
            }
        )
    writer.close()
    return folder / "r.csv"


def test_extra_builds_start_while_the_cheapest_repeat_fits_and_stop_when_one_measured_nothing(
    tmp_path,
):
    csv = write_rows(
        tmp_path,
        [
            row("a", 0, 1.0, build_s=10.0),
            row("b", 0, 1.0, build_s=2.0),
            row("epoch", 0, 9.0, builds=1, build_s=1.0),
        ],
    )
    # long, so that reading the file is no part of the margin
    answers = [BuildAnswer(0, 3, startup_s=100.0)]
    # 100 s to start + b's 2 s x 1.25
    assert ExtraBuilds(time.time() + 200.0, csv)(3, answers)
    assert not ExtraBuilds(time.time() + 102.0, csv)(3, answers)
    more = ExtraBuilds(time.time() + 200.0, csv)
    assert more(3, answers)
    assert more(4, [*answers, BuildAnswer(3, 4, rows_written=2)])
    # the last one found nothing that fit
    assert not more(5, [*answers, BuildAnswer(4, 5, rows_written=0)])
    assert not ExtraBuilds(
        time.time() + 60.0, write_rows(tmp_path / "x", [row("epoch", 0, 9.0, builds=1)])
    )(1, answers)


def test_extra_builds_start_after_the_profiles_and_one_with_nothing_to_repeat_ends_the_run():
    plans = []

    class Launcher:
        def run(self, job):
            plans.append(job.plan)
            if job.plan.build >= 2 and len(plans) == 4:
                return Completed(NO_TESTS, answer=BuildAnswer(job.plan.build, None))
            return Completed(0, answer=BuildAnswer(job.plan.build, 2, rows_written=1))

    def job_for(build, builds):
        extra = builds is not None and build >= builds
        return Job(["build"], plan=BuildPlan(build, [], [], builds=builds, extra=extra))

    outcome = run_builds(Launcher(), job_for, (2, 3, 4), more=lambda build, answers: build < 5)
    assert [(plan.build, plan.extra) for plan in plans] == [
        (0, False),
        (1, False),
        (2, True),
        (3, True),
    ]
    assert (
        outcome.code == 0 and not outcome.stopped and not outcome.cut_short and outcome.builds == 2
    )


# tests/runs.py
TWO_CASE_BENCH = ONE_CASE_BENCH.replace("[TinyCase(8)]", "[TinyCase(8), TinyCase(16)]")


def build_of_tiny(pytester, build: int, deadline_s: float | None = None):
    """Extra build `build` (past the profile's) as gpubench run starts it: a process of its own,
    with its plan."""
    run = RunOptions(profile="smoke", results_dir="out", run_id="r", builds=2, run_budget_s=600.0)
    plan = BuildPlan(
        build,
        ["-rs"],
        ["-p", "gpubench.harness.pytest_plugin.plugin", "bench_tiny.py"],
        run,
        extra=True,
        deadline_s=deadline_s,
    )
    return run_build_process(plan, pytester.path)[0]


# three pytest sessions, each a process (see build_of_tiny)
@pytest.mark.process
def test_an_extra_build_repeats_the_repeated_cases_within_the_deadline_and_records_nothing_past_it(
    pytester, monkeypatch
):
    monkeypatch.setenv("GPUBENCH_DOWNLOAD", "0")
    pytester.makepyfile(bench_tiny=TWO_CASE_BENCH)
    both = pytester.runpytest_subprocess(
        "-p",
        "gpubench.harness.pytest_plugin.plugin",
        "bench_tiny.py",
        "--benchmark-only",
        "--profile=smoke",
        "--results-dir=out",
        "--run-id=r",
        "--builds=2",
        "--budget=10m",
    )
    # both builds in one session
    assert both.ret == 0
    assert build_of_tiny(pytester, 2).returncode == 0
    rows = read_rows(pytester.path / "out" / "r.csv")
    assert sorted((r["case_id"], r["build"], r["status"]) for r in rows if r["build"] == 2) == [
        ("matmul/n16", 2, "ok"),
        ("matmul/n8", 2, "ok"),
    ]
    # the run's time is spent
    result = build_of_tiny(pytester, 3, deadline_s=time.time() - 1.0)
    assert result.returncode == 0 and "2 skipped" in result.stdout, result.stdout[-2000:]
    assert "extra build: its build does not fit the budget's time left" in result.stdout
    assert [r for r in read_rows(pytester.path / "out" / "r.csv") if r["build"] == 3] == []


def test_a_later_build_is_planned_with_the_start_a_build_measured_not_the_fork_servers(tmp_path):
    from datetime import datetime, timezone

    from gpubench.harness.commands.budget_builds import WithinBudget

    started = []

    class Inner:
        def run(self, job):
            started.append(job.plan.build)
            return Completed(
                0, answer=BuildAnswer(job.plan.build, 3, rows_written=1, startup_s=1.0)
            )

    budgeted = WithinBudget(Inner(), time.time() + 20, tmp_path / "r.csv")
    budgeted.run(Job(["build"], plan=BuildPlan(0, [], [])))
    # its first row 30 s after its launch (a fork server importing torch first); the build itself
    # started in 1 s
    late_s = datetime.fromtimestamp(time.time() + 30, timezone.utc).isoformat()
    write_rows(tmp_path, [dict(row("a", 0, 1.0), timestamp_utc=late_s)])
    budgeted.run(Job(["build"], plan=BuildPlan(1, [], [], builds=3)))
    assert started == [0, 1] and not budgeted.notes()


def test_a_build_process_collects_its_own_build_of_each_case_only():
    from gpubench.harness.pytest_plugin.extra_build import builds_to_collect

    # plain pytest: every build in one process
    assert builds_to_collect(3, None, False) == [0, 1, 2]
    # an ab session's 8th pair: not 100 items per case
    assert builds_to_collect(100, 7, False) == [7]
    # an epoch built once, in a run's third build: deselected there
    assert builds_to_collect(1, 2, False) == [0]
    assert builds_to_collect(3, 4, True) == [4] and builds_to_collect(1, 4, True) == [0]


def test_a_build_process_plans_for_the_builds_after_its_own_though_it_collects_only_its_own():
    from types import SimpleNamespace

    from gpubench.harness.pytest_plugin.budget_hooks import planned_entries

    def item(case_id, build):
        return SimpleNamespace(
            fixturenames=["gpubench"],
            callspec=SimpleNamespace(
                params={"case": SimpleNamespace(case_id=case_id), "gpubench_build": build}
            ),
        )

    builds = {"micro": 3, "epoch": 1}
    assert planned_entries(builds, [item("micro", 1), item("epoch", 0)]) == [
        ("micro", 0),
        ("micro", 1),
        ("micro", 2),
        ("epoch", 0),
    ]
    # an extra build
    assert planned_entries(builds, [item("micro", 4)]) == [("micro", 4)]
    assert planned_entries(builds, [item("micro", 0), item("micro", 1), item("micro", 2)]) == [
        # plain pytest collects every build
        ("micro", 0),
        ("micro", 1),
        ("micro", 2),
    ]
