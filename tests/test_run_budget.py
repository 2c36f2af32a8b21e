"""A run under --budget: durations, shares, capping and skipping, the plan, history. Fake clocks
and fake slow cases: nothing here times real work (one case hangs for 50 ms, to be cut)."""

import signal
import time
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
from fakes import FakeBenchmark, RunContext, run_with

from gpubench.harness.catalog.profiles import Profile
from gpubench.harness.core.plan import BuildTiming
from gpubench.harness.budget.shares import (
    COST_MARGIN,
    MIN_SHARE_S,
    CaseCost,
    CaseShare,
    OverBudget,
    share_of,
    water_level,
)
from gpubench.harness.budget.clock import OVERRUN_GRACE_S, DeadlinePassed, cut_after
from gpubench.harness.core.duration_text import format_duration, parse_duration
from gpubench.harness.core.exits import UsageError
from gpubench.harness.measurement import timing
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.pytest_plugin.budget_hooks import cut_at_run_end
from gpubench.harness.measurement.measure import Timed, measure
from gpubench.harness.measurement.timing import SyncedClock
from gpubench.harness.budget.plan import PRIOR_WEIGHT_S, BudgetPlan, budget_plan
from gpubench.harness.records.durations import history
from gpubench.harness.records.results import ResultsWriter
from gpubench.harness.records.results_reader import read_rows
from gpubench.harness.records.schema import SCHEMA_VERSION
from gpubench.harness.workloads.matmul import MatmulCase

CPU = torch.device("cpu")


class SlowCase:
    """A case whose every call costs `call_s` on a fake clock that only moves when work runs."""

    def __init__(self, call_s: float) -> None:
        self.now_s, self.call_s, self.calls = 1000.0, call_s, 0

    def clock(self) -> float:
        return self.now_s

    def call(self) -> None:
        self.calls += 1
        self.now_s += self.call_s


@pytest.fixture
def slow(monkeypatch):
    monkeypatch.setattr(timing, "synchronize", lambda device: None)
    case = SlowCase(1.0)
    case.synced = SyncedClock(CPU, case.clock)
    return case


BUDGET = BuildTiming(target_s=10.0, min_round_s=1e-3, min_rounds=5, max_rounds=50, warmup_calls=2)


@pytest.mark.parametrize(
    "text, seconds",
    [("90s", 90), ("4m", 240), ("1h", 3600), ("1.5m", 90), ("1h30m", 5400), (" 2M ", 120)],
)
def test_durations_read_as_the_user_writes_them(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text",
    ["5x", "m", "-3m", "0s", "", "45", "5 minutes", "1e307s", "9" * 400 + "s", "1h1h", "30m1h"],
)
def test_a_bad_duration_is_one_line_that_names_the_fix(text):
    with pytest.raises(
        UsageError, match=r"--budget .*: use a duration such as 90s, 4m, 1h or 1h30m"
    ):
        parse_duration(text)


@pytest.mark.parametrize("text", ["169h", "9" * 300 + "s"])
def test_a_budget_past_a_week_is_refused_before_a_timer_overflows(text):
    with pytest.raises(UsageError, match=r"--budget .*: at most 168h — use none for no limit"):
        parse_duration(text)
    assert parse_duration("168h") == 7 * 24 * 3600


def test_none_means_no_budget_and_quick_has_one_by_default():
    assert parse_duration("none") is None
    assert Profile.QUICK.run_budget_s == 300 and Profile.FULL.run_budget_s is None
    shown = [format_duration(seconds) for seconds in (2.13, 25.2, 180, 151)]
    assert shown == ["2.1 s", "25 s", "3m", "2m31s"]


def test_known_cheap_cases_get_their_cost_and_the_rest_split_what_is_left():
    # 100 s left: two cases known to cost 4 s and 8 s, one 300 s, one unknown
    level = water_level([4.0, 8.0, 300.0, None], 100.0)
    assert level == pytest.approx((100 - 4 * COST_MARGIN - 8 * COST_MARGIN) / 2)
    assert share_of(4.0, [8.0, 300.0, None], 100.0) == pytest.approx(4 * COST_MARGIN)
    assert share_of(300.0, [4.0, 8.0, None], 100.0) == pytest.approx(level)
    assert share_of(None, [4.0, 8.0, 300.0], 100.0) == pytest.approx(level)
    # no history: equal shares
    assert share_of(None, [None, None, None], 100.0) == pytest.approx(25.0)


def test_when_everything_fits_each_share_grows_with_its_cost():
    assert share_of(10.0, [30.0], 200.0) == pytest.approx(50.0)


def test_a_case_whose_rounds_do_not_fit_is_capped_and_stays_within_its_share(slow):
    share = CaseShare(4.5, 180.0, now=slow.clock)
    m = measure(Timed(fn=slow.call), BUDGET, slow.synced, share=share)
    assert m.plan.rounds == 2 and m.capped.startswith(
        "capped: 2 of 10 rounds fit its 4.5 s share of the 3m budget"
    )
    assert m.first_call_s == 1.0 and len(m.samples_s) == 2
    # the budget holds
    assert slow.now_s - share.started_s <= share.share_s


def test_a_case_whose_one_call_does_not_fit_is_skipped_after_that_call(slow):
    share = CaseShare(1.5, 180.0, now=slow.clock)
    reason = (
        r"one call takes 1\.0 s and 1\.0 s of its 1\.5 s share of the 3m budget went to building "
        r"and warming it up: no timed call fits — raise --budget or deselect it"
    )
    with pytest.raises(OverBudget, match=reason) as over:
        measure(Timed(fn=slow.call), BUDGET, slow.synced, share=share)
    assert slow.calls == 1 and over.value.columns == {"first_call_s": 1.0}


def test_a_probe_that_says_one_call_is_too_slow_saves_the_call(slow):
    share = CaseShare(2.0, 180.0, now=slow.clock)
    with pytest.raises(OverBudget, match="one call takes 25 s") as over:
        measure(Timed(fn=slow.call, estimate=lambda: 25.0), BUDGET, slow.synced, share=share)
    # the next run skips it unbuilt
    assert slow.calls == 0 and over.value.columns == {"first_call_s": 25.0}


def test_without_a_share_nothing_is_capped(slow):
    m = measure(Timed(fn=slow.call), BUDGET, slow.synced)
    assert m.plan.rounds == 10 and m.capped == ""


def test_a_known_call_that_does_not_fit_skips_the_case_before_it_is_built(tmp_path):
    built = []
    writer = ResultsWriter(tmp_path, "run")
    bctx = BuildContext(
        CPU, "quick", SyncedClock(CPU), share=CaseShare(2.1, 180.0, known_call_s=25.0)
    )

    class Workload:
        def set_up(self, case, ctx):
            built.append(case)

        def cases(self, ctx):
            return []

    base = {"schema_version": SCHEMA_VERSION, "run_id": "run"}
    row = run_with(
        MatmulCase("bf16", 2048), Workload(), FakeBenchmark(), RunContext(bctx, base, writer)
    )
    writer.close()
    assert built == [] and row["status"] == "skipped"
    assert row["reason"] == (
        "over budget: one call takes 25 s; its share of the 3m budget is 2.1 s — "
        "raise --budget or deselect it"
    )
    assert row["build_s"] >= 0


def plan_of(costs, here, later=(), now_s=0.0, deadline_s=100.0, headline=()):
    return BudgetPlan(
        180.0,
        deadline_s,
        costs,
        [(c, 0) for c in here],
        [(c, 1) for c in later],
        later_processes=1 if later else 0,
        startup_s=10.0,
        now=lambda: now_s,
        cases=len(set(here)),
        builds=2 if later else 1,
        headline=frozenset(headline),
    )


def test_first_builds_share_the_time_before_any_repeat_and_later_builds_start_up_is_kept_out():
    costs = {"a": CaseCost(10.0), "b": CaseCost(10.0)}
    plan = plan_of(costs, ["a", "b"], ["a", "b"])
    # a's first build beside b's, each at its cost scaled to the 90 s the later process's start
    # leaves
    assert plan.share_for("a").share_s == pytest.approx((100 - 10) / 2)
    # its later build will not run
    plan.done("a", skipped=True)
    assert plan.later == [("b", 1)]
    # b's first build keeps b's repeat's reserve out of nothing: repeats get what first builds leave
    assert plan.share_for("b").share_s == pytest.approx(90)
    plan.done("b", skipped=False)
    # as the later process sees it
    plan.here.append(("b", 1))
    plan.later.clear()
    assert plan.share_for("b").share_s == pytest.approx(100 - 10)


def test_a_case_skipped_in_one_process_drops_its_repeats_from_the_plan():
    plan = plan_of({"a": CaseCost(10.0), "b": CaseCost(10.0)}, ["a", "b"])
    # plain pytest: every build in this process
    plan.here = [("a", 0), ("b", 0), ("a", 1), ("b", 1)]
    plan.done("a", skipped=True)
    assert plan.here == [("b", 0), ("b", 1)]


def test_a_repeat_gets_only_what_the_first_builds_still_to_run_leave():
    costs = {"a": CaseCost(10.0), "b": CaseCost(60.0)}
    plan = plan_of(costs, ["a", "a", "b"], deadline_s=100.0)
    # a plain pytest run's order, one process
    plan.here = [("a", 0), ("a", 1), ("b", 0)]
    plan.done("a", skipped=False)
    # b's first build (60 s with its margin: 75) is reserved before a's repeat, which gets the 25 s
    # left
    assert plan.share_for("a").share_s == pytest.approx(100 - 60.0 * COST_MARGIN)


def test_a_headline_case_is_funded_whole_beside_the_others_and_the_settings_share_the_rest():
    costs = {
        "epoch": CaseCost(20.0, 19.0, predicted=True),
        "dram": CaseCost(8.0, 0.1, predicted=True),
        **{f"micro{i}": CaseCost(1.0, 0.01) for i in range(50)},
    }
    micro = [f"micro{i}" for i in range(50)]
    plan = plan_of(costs, ["epoch", "dram", *micro], deadline_s=60.0, headline={"epoch", "dram"})
    # all that is left, not a 60/52 s water-filled share: the other headline case's cost-model price
    # keeps nothing back (a guess must not starve a case that came first)
    assert plan.share_for("epoch").share_s == pytest.approx(60.0)
    # a predicted call is the model's guess: the case's own first call decides
    assert plan.share_for("epoch").known_call_s is None
    assert plan.share_for("epoch").predicted_build_s == 20.0
    # a settings case shares what both headline cases leave
    assert plan.share_for("micro0").share_s == pytest.approx((60.0 - 28.0) / 50)
    plan.done("epoch", skipped=False)
    assert plan.share_for("micro0").share_s == pytest.approx((60.0 - 8.0) / 50)


def test_history_is_the_newest_row_of_this_machine_device_and_profile(tmp_path):
    # the newer run's file written first: the rows' times decide, not the order files are found in
    runs = [
        ("new", "2026-11-02", "m1", "ok", "", 3.0, 0.5),
        ("old", "2026-11-01", "m1", "ok", "", 9.0, 0.5),
        ("other", "2026-11-03", "m2", "ok", "", 7.0, 0.5),
        # skipped for the budget before its first call: no news of its cost
        ("newest", "2026-11-04", "m1", "skipped", "over budget: its share is 0.1 s", 0.001, None),
        # the same case id at the smoke profile's size: no news of its quick cost
        ("smoke", "2026-11-05", "m1", "ok", "", 0.2, 0.01),
    ]
    for run_id, day, machine, status, reason, build_s, first_call_s in runs:
        writer = ResultsWriter(tmp_path, run_id)
        writer.append(
            {
                "schema_version": SCHEMA_VERSION,
                "run_id": run_id,
                "timestamp_utc": f"{day}T10:00:00+00:00",
                "machine_id": machine,
                "hostname": "h",
                "device": "cpu",
                "device_name": "x",
                "torch_version": "2",
                "cuda_version": "",
                "workload": "matmul",
                "case_id": "matmul/fp32-n64",
                "status": status,
                "reason": reason,
                "build_s": build_s,
                "first_call_s": first_call_s,
                "flags": "over-budget" if status == "skipped" else "",
                "profile": "smoke" if run_id == "smoke" else "quick",
            }
        )
        writer.close()
    (tmp_path / "damaged.csv").write_text("not,a\ngpubench,file\n")
    assert history(tmp_path, "m1", "cpu", "quick").costs == {
        "matmul/fp32-n64": CaseCost(3.0, 0.5, history=True)
    }
    assert history(tmp_path, "m1", "cpu", "smoke").costs == {
        "matmul/fp32-n64": CaseCost(0.2, 0.01, history=True)
    }
    assert history(tmp_path, "m1", "cuda:0", "quick").costs == {}


def test_a_share_too_small_to_build_a_case_skips_it_unbuilt(tmp_path):
    built = []

    class Workload:
        def set_up(self, case, ctx):
            built.append(case)

        def cases(self, ctx):
            return []

    bctx = BuildContext(CPU, "quick", SyncedClock(CPU), share=CaseShare(0.05, 180.0))
    row = run_with(
        MatmulCase("fp32", 64),
        Workload(),
        FakeBenchmark(),
        RunContext(bctx, {"run_id": "run"}, None),
    )
    assert built == [] and row["status"] == "skipped"
    assert row["reason"].startswith(
        "over budget: its share of the 3m budget is 50 ms, too little to build it and time"
    )


def test_a_launch_is_stopped_at_its_share_and_becomes_a_skipped_case(monkeypatch, tmp_path):
    from gpubench.harness.workloads.common import torchrun_launch

    limits = []

    def timed_out(command, result_json, timeout_s, stall_s):
        limits.append(timeout_s)
        raise torchrun_launch.LaunchTimedOut("torchrun timed out")

    monkeypatch.setattr(torchrun_launch, "launch", timed_out)
    stopped = (
        r"the launch ran .* and was stopped at its 5\.0 s share of the 3m budget — raise --budget"
    )
    with pytest.raises(OverBudget, match=stopped) as over:
        torchrun_launch.budgeted_launch(
            ["torchrun"], tmp_path / "rank0.json", 600.0, 60.0, CaseShare(5.0, 180.0)
        )
    assert limits and limits[0] <= 5.0 and over.value.columns["first_call_s"] >= 0
    # no budget: a launch past its own timeout is a failure, as before
    with pytest.raises(torchrun_launch.LaunchTimedOut):
        torchrun_launch.budgeted_launch(["torchrun"], tmp_path / "rank0.json", 600.0, 60.0, None)


def test_a_fixed_plan_of_many_steps_is_cut_to_its_share_too(slow):
    from gpubench.harness.core.plan import RoundPlan

    share = CaseShare(3.5, 180.0, now=slow.clock)
    m = measure(
        Timed(fn=slow.call, plan=RoundPlan(0, 1, 20, 0.0)), BUDGET, slow.synced, share=share
    )
    assert (
        m.plan.rounds == 2
        and m.capped.startswith("capped: 2 of 20 rounds")
        and len(m.samples_s) == 2
    )
    assert slow.now_s - share.started_s <= share.share_s


def test_a_call_that_fits_but_not_beside_the_build_says_so(slow):
    share = CaseShare(1.5, 180.0, now=slow.clock)
    # building the case took a second
    slow.now_s += 1.0
    assert share.over(0.6) == (
        "over budget: one call takes 0.6 s and 1.0 s of its 1.5 s share of the 3m budget went "
        "to building and warming it up: no timed call fits — raise --budget or deselect it"
    )
    assert share.over(2.0) == (
        "over budget: one call takes 2.0 s; its share of the 3m budget is 1.5 s — "
        "raise --budget or deselect it"
    )


def test_a_later_build_process_starts_only_with_time_and_a_case_left(tmp_path):
    import time
    from datetime import datetime

    from gpubench.harness.commands.budget_builds import WithinBudget
    from gpubench.harness.processes.launch import Completed, Job
    from gpubench.harness.processes.protocol import BuildPlan

    started = []

    class Inner:
        def run(self, job):
            started.append(job.plan.build)
            return Completed(0)

    writer = ResultsWriter(tmp_path, "r")
    for case_id, status, builds in [
        ("matmul/fp32-n64", "skipped", 3),
        ("matmul/fp32-n128", "ok", 2),
    ]:
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
                "case_id": case_id,
                "status": status,
                "reason": "",
                "build": 0,
                "builds": builds,
            }
        )
    writer.close()

    def job(build):
        return Job(["python"], plan=BuildPlan(build, [], []))

    WithinBudget(Inner(), time.time() + 60, tmp_path / "r.csv").run(job(1))
    # the fp32-n128 case has a second build, and there is time
    assert started == [1]
    spent = WithinBudget(Inner(), time.time() - 1, tmp_path / "r.csv")
    spent.run(job(0)), spent.run(job(1)), spent.run(job(2))
    assert started[1:] == [0] and spent.notes() == [
        "budget: build(s) 2, 3 of each case not started (the budget was spent, or every case was "
        "skipped in its first build) — raise --budget for more builds"
    ]
    nothing_left = WithinBudget(Inner(), time.time() + 60, tmp_path / "r.csv")
    # only a case its first build skipped has a third build
    nothing_left.run(job(2))
    assert started[2:] == [] and nothing_left.notes()
    # 30 s from the first build's launch to its first row: a later build 20 s before the end would
    # overrun
    first_row_s = datetime.fromisoformat("2026-11-02T10:00:00+00:00").timestamp()
    late = WithinBudget(Inner(), time.time() + 20, tmp_path / "r.csv", launched_s=first_row_s - 30)
    late.run(job(1))
    assert started[2:] == [] and late.notes()
    # a build that measured nothing: the next one would find even less time for the same cases
    three = ResultsWriter(tmp_path, "three")
    three.append(
        {
            "schema_version": SCHEMA_VERSION,
            "run_id": "three",
            "timestamp_utc": "2026-11-02T10:00:00+00:00",
            "machine_id": "m",
            "hostname": "h",
            "device": "cpu",
            "device_name": "x",
            "torch_version": "2",
            "cuda_version": "",
            "workload": "matmul",
            "case_id": "matmul/fp32-n64",
            "status": "ok",
            "reason": "",
            "build": 0,
            "builds": 3,
        }
    )
    three.close()
    for last_rows, starts in [(0, False), (1, True)]:
        WithinBudget(Inner(), time.time() + 60, tmp_path / "three.csv", last_rows=last_rows).run(
            job(2)
        )
        assert (started[-1:] == [2]) == starts


class StateAtItsEnd:
    """A run whose end and grace fall 50 ms from now."""

    def __init__(self):
        self.budget_s, self.end_s = 8.0, time.time() - OVERRUN_GRACE_S + 0.05
        self.records = SimpleNamespace(stop=None)


# pytest-timeout's own SIGALRM would hold the cut off (cut_after)
@pytest.mark.timeout(60, method="thread")
def test_a_test_that_never_returns_is_cut_past_the_run_end_and_its_grace_and_the_run_stops():
    state = StateAtItsEnd()
    with pytest.raises(
        DeadlinePassed, match=r"^did not end within the run's 8.0 s budget and 30 s more: cut"
    ):
        with cut_at_run_end(state, "t.py::test_hang"):
            # a --model factory or a --tests test that never returns
            while True:
                time.sleep(0.01)
    assert (
        state.records.stop.line.startswith("t.py::test_hang did not end")
        and state.records.stop.code == 1
    )
    assert (
        signal.getitimer(signal.ITIMER_REAL)[0] == 0
        and signal.getsignal(signal.SIGALRM) is signal.SIG_DFL
    )


def test_a_case_cut_mid_build_keeps_a_failed_row_and_the_cut_goes_on(tmp_path):
    class Workload:
        def set_up(self, case, ctx):
            # the alarm, arriving in the user's code
            raise DeadlinePassed("did not end within the run's 8.0 s budget")

        def cases(self, ctx):
            return []

    writer = ResultsWriter(tmp_path, "run")
    bctx = BuildContext(CPU, "quick", SyncedClock(CPU))
    with pytest.raises(DeadlinePassed):
        run_with(
            MatmulCase("fp32", 64),
            Workload(),
            FakeBenchmark(),
            RunContext(bctx, {"schema_version": SCHEMA_VERSION, "run_id": "run"}, writer),
        )
    writer.close()
    assert [(row["status"], row["reason"]) for row in read_rows(writer.path)] == [
        ("failed", "did not end within the run's 8.0 s budget")
    ]


# pytest-timeout's own SIGALRM would hold the cut off (cut_after)
@pytest.mark.timeout(60, method="thread")
def test_no_alarm_is_armed_without_a_budget_or_over_another_plugins_alarm():
    with cut_at_run_end(None, "t.py::test"):
        assert signal.getitimer(signal.ITIMER_REAL)[0] == 0
    signal.setitimer(signal.ITIMER_REAL, 100.0)
    try:
        with cut_after(0.01, "never"):
            # pytest-timeout's alarm left as it was
            assert 99 < signal.getitimer(signal.ITIMER_REAL)[0] <= 100
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def test_the_rest_of_the_plan_is_repriced_at_the_pace_this_run_has_seen():
    costs = {"a": CaseCost(10.0, 9.0, predicted=True), "b": CaseCost(10.0, 9.5, predicted=True)}
    plan = plan_of(costs, ["a", "b"], deadline_s=1000.0)
    # before any case, a predicted call is the model's guess: the case's own first call decides
    assert plan.share_for("b").known_call_s is None
    plan.share_for("a")
    # twice its price, priced with a whole share
    plan.done("a", skipped=False, build_s=20.0)
    pace = (20.0 + PRIOR_WEIGHT_S) / (10.0 + PRIOR_WEIGHT_S)
    assert plan.pace() == pytest.approx(pace)
    share = plan.share_for("b")
    assert share.expected_build_s == pytest.approx(10.0 * pace)
    # now checked before b is built
    assert share.known_call_s == pytest.approx(9.5 * pace)
    # said where the price refuses the case, not beside a call measured in the build
    assert "the cost model's price x1.8, this run's pace" in replace(share, share_s=1.0).over(
        share.known_call_s
    )
    assert "price" not in replace(share, share_s=1.0).over(share.known_call_s + 1.0)


def test_a_capped_build_teaches_the_pace_nothing_and_a_refused_first_call_does():
    costs = {"a": CaseCost(100.0, 1.0), "b": CaseCost(10.0, 4.0)}
    plan = plan_of(costs, ["a", "b"], deadline_s=50.0)
    # 50 s of its 125: capped by design, so its short build says nothing of the prices
    plan.share_for("a")
    plan.done("a", skipped=False, build_s=50.0)
    assert plan.pace() == pytest.approx(1.0) and plan.seen == []
    plan.share_for("b")
    # refused after a call three times its price
    plan.done("b", skipped=True, first_call_s=12.0)
    assert plan.seen == [(12.0, 4.0)]


def test_many_builds_in_a_short_budget_plan_the_builds_that_fit_and_say_so(monkeypatch):
    entries = [(case, build) for build in range(100) for case in ("a", "b", "c")]
    # each build process starts in ~1 s
    plan = budget_plan(
        30.0, time.time() + 29.0, {}, entries, only_build=0, skipped=set(), startup_s=1.0
    )
    # 99 later start-ups kept out of 30 s left the first build 0 s a case: nothing was measured
    assert all(plan.share_for(case).share_s >= 2.0 for case in ("a", "b", "c"))
    assert 10 <= plan.later_builds_fit() < 99
    assert (
        f"gpubench: later builds: time kept for {plan.later_builds_fit()} of 99 (each starts in "
        "~1.0 s) — pass fewer --builds or a longer --budget for all"
    ) in plan.plan_lines()
    # a later build's repeats share its time with those of the builds that fit, not with 98 builds'
    # repeats
    later = budget_plan(
        30.0,
        time.time() + 24.0,
        {case: CaseCost(0.025) for case in "abc"},
        entries,
        only_build=1,
        skipped=set(),
        startup_s=1.0,
    )
    assert all(later.share_for(case).share_s >= MIN_SHARE_S for case in "abc")


@pytest.mark.parametrize("text", ["0.001s", "4s", "4.9s"])
def test_a_budget_too_short_to_build_one_case_is_refused_naming_the_least(text, tmp_path):
    from gpubench.harness.core.options import RUN_OPTIONS, read_run_options
    from gpubench.harness.core.duration_text import parse_budget

    line = (
        f"--budget {text}: below 5.0 s, too short for a build to start and build one case — pass "
        "--budget 5s or more"
    )
    with pytest.raises(UsageError, match=f"^{line}"):
        parse_budget(text)
    values = {option.dest: option.default for option in RUN_OPTIONS} | {"budget": text}
    # the options are read once, before any build starts
    with pytest.raises(UsageError, match=f"^{line}"):
        read_run_options(values.get, lambda profile: None)
    assert parse_budget("5s") == 5.0 and parse_budget("none") is None


def fast_micro_seen(plan: BudgetPlan, pace: float, cases: int = 20) -> None:
    """This process has seen `cases` micro cases take `pace` times their 0.25 s prices."""
    plan.seen += [(0.25 * pace, 0.25)] * cases


@pytest.mark.parametrize("priced_by", ["history", "model"])
def test_a_pace_learned_on_fast_cases_cannot_drop_a_headline_whose_own_price_fits(priced_by):
    """A `make bench` run skipped its guide-template epoch ('one call takes 2m06s; its share
    1m56s'): the pace of the micro cases before it multiplied the epoch's price. A headline is
    priced by itself."""
    epoch = CaseCost(30.0, 29.0, history=priced_by == "history", predicted=priced_by == "model")
    costs = {
        "epoch": epoch,
        "tta": CaseCost(40.0, 39.0, predicted=True),
        "micro": CaseCost(0.25, 0.01),
    }
    plan = plan_of(costs, ["epoch", "tta", "micro"], deadline_s=120.0, headline={"epoch", "tta"})
    fast_micro_seen(plan, pace=4.0)
    assert plan.pace() > 3.0
    assert plan.promise() == ["epoch", "tta"] and plan.left_out == {}
    share = plan.share_for("epoch")
    # its own call decides, and its share holds its own price, not the paced one (4x 30 s); tta's
    # guess keeps nothing
    assert share.known_call_s is None and share.left_out == ""
    assert share.share_s == pytest.approx(120.0)
    assert share.expected_build_s == pytest.approx(30.0)


def test_a_headline_that_cannot_fit_at_its_measured_cost_is_named_first_and_never_built():
    costs = {
        "dram": CaseCost(8.0, 0.1, history=True),
        "epoch": CaseCost(100.0, 99.0, history=True),
        "tta": CaseCost(30.0, 29.0, predicted=True),
        "micro": CaseCost(1.0, 0.01),
    }
    plan = BudgetPlan(
        180.0,
        60.0,
        costs,
        [("dram", 0), ("epoch", 0), ("tta", 0), ("micro", 0)],
        now=lambda: 0.0,
        cases=4,
        builds=1,
        headline=frozenset({"dram", "epoch", "tta"}),
    )
    lines = plan.plan_lines()
    assert all(len(line) <= 200 for line in lines)
    assert lines[0] == (
        "gpubench: plan for the 3m budget: 2 headline cases first, each whole (~38 s: 1 priced by "
        "its own time here, 1 by the cost model), then 1 other case shares the time left"
    )
    # the cost model's 30 s is a guess: tta is promised, its own first call decides; epoch's 100 s
    # was measured here
    assert lines[1].startswith(
        "gpubench: headline left out, too slow here before: epoch (1m40s) — --budget"
    )
    share = plan.share_for("epoch")
    assert share.share_s == 0.0 and share.left_out.startswith(
        "over budget: left out by the plan (its first line): it took 1m40s here before"
    )
    from gpubench.harness.measurement.runner import check_known_cost

    with pytest.raises(OverBudget) as refused:
        check_known_cost(share)
    assert refused.value.flags == ("over-budget", "left-out")


def test_the_promise_is_made_once_and_a_slow_headline_never_unpromises_the_next():
    costs = {h: CaseCost(20.0, 19.0, history=True) for h in ("a", "b", "c")}
    clock = {"now": 0.0}
    plan = BudgetPlan(
        180.0,
        70.0,
        costs,
        [("a", 0), ("b", 0), ("c", 0)],
        now=lambda: clock["now"],
        cases=3,
        builds=1,
        headline=frozenset(costs),
    )
    assert plan.promise() == ["a", "b", "c"]
    plan.share_for("a")
    clock["now"] = 50.0
    plan.done("a", skipped=False, build_s=50.0)
    # a took 2.5x its time: b and c are still promised; b, first, is given all that is left
    assert plan.promise() == ["a", "b", "c"] and plan.left_out == {}
    assert plan.share_for("b").share_s == pytest.approx(20.0)
    clock["now"] = 0.0
    # with time enough, b keeps back what c was measured to cost here
    assert plan.share_for("b").share_s == pytest.approx(70.0 - 20.0)


def test_a_plan_line_contradicted_by_the_rows_fails():
    from gpubench.harness.budget.promise import delivery_lines

    rows = [
        {"case_id": "a", "build": 0, "status": "ok", "flags": "", "reason": ""},
        {
            "case_id": "a",
            "build": 1,
            "status": "skipped",
            "flags": "over-budget",
            "reason": "over budget: x",
        },
        {
            "case_id": "b",
            "build": 0,
            "status": "skipped",
            "flags": "over-budget",
            "reason": "over budget: one call",
        },
        {
            "case_id": "d",
            "build": 0,
            "status": "ok",
            "flags": "impossible",
            "reason": "scaling efficiency 2.6",
        },
        {"case_id": "c", "build": 0, "status": "ok", "flags": "", "reason": ""},
        {
            "case_id": "tf32",
            "build": 0,
            "status": "skipped",
            "flags": "",
            "reason": "tf32 is a CUDA mode",
        },
    ]
    assert delivery_lines(["a"], [], rows) == ["gpubench: headline: 1 promised, 1 delivered"]
    lines = delivery_lines(["a", "b", "d", "e", "tf32"], ["c"], rows)
    # a setting the device cannot run is no promise the plan could keep or break
    assert lines[0] == (
        "gpubench: headline: 4 promised, 1 delivered; 1 left out by the plan, as its first line "
        "said; 1 this device cannot run (tf32):"
    )
    assert lines[1] == "  b: skipped — over budget: one call"
    assert lines[2].startswith(
        "  d: measured, flagged impossible and kept out of the summary — scaling"
    )
    assert lines[3] == "  e: no row (its build ended before it was recorded)"
    assert lines[4] == "gpubench: error: the plan left out c and it ran anyway"
    assert delivery_lines([], [], rows) == []


def test_a_long_cause_is_cut_at_a_word_never_mid_word():
    from gpubench.harness.budget.promise import shortened

    cut = shortened("over budget: " + "word " * 60, 40)
    assert len(cut) <= 40 and cut.endswith("word…")
    assert shortened("short", 40) == "short"


def test_the_runs_deadline_is_computed_once_by_one_formula():
    """The run's end from its budget is written in budget.clock alone: every other module asks
    it."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    sums = []
    for path in sorted((root / "harness").rglob("*.py")) + sorted((root / "reports").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
                names = {
                    n.id if isinstance(n, ast.Name) else getattr(n, "attr", "")
                    for n in ast.walk(node)
                }
                if any(name.endswith("budget_s") for name in names) and {"time", "began_s"} & names:
                    sums.append(f"{path.relative_to(root)}:{node.lineno}")
    assert [place.split(":")[0] for place in sums] == ["harness/budget/clock.py"]


def test_a_row_written_before_the_flag_reads_over_budget_from_its_words_once():
    from gpubench.harness.records.upgrade import upgrade_row

    old = {
        "status": "skipped",
        "reason": "over budget: one call takes 25 s; its share is 2 s",
        "flags": "busy",
    }
    assert upgrade_row(old, 5, "old.csv")["flags"] == "busy;over-budget"
    other = {"status": "skipped", "reason": "tf32 is a CUDA tensor-core mode", "flags": ""}
    assert upgrade_row(other, 5, "old.csv")["flags"] == ""


def test_every_plan_line_fits_two_screen_lines_and_names_what_fits():
    costs = {
        f"time_to_accuracy/template-seed{i}-with-a-long-name": CaseCost(100.0, 99.0, history=True)
        for i in range(9)
    }
    plan = BudgetPlan(
        180.0,
        30.0,
        costs,
        [(case, 0) for case in costs],
        now=lambda: 0.0,
        cases=9,
        builds=1,
        headline=frozenset(costs),
        history_note="history: 1 file not yours passed over",
    )
    lines = plan.plan_lines()
    assert all(len(line) <= 200 for line in lines), [len(line) for line in lines]
    assert "time_to_accuracy/template-seed0-with-a-long-name (1m40s)" in lines[1]
    assert "more — --budget" in lines[1] and lines[1].endswith("includes them")


def test_headline_prices_past_the_time_left_are_said_with_who_decides():
    costs = {
        "epoch": CaseCost(400.0, 399.0, predicted=True),
        "dram": CaseCost(8.0, 0.1, predicted=True),
    }
    plan = BudgetPlan(
        300.0,
        300.0,
        costs,
        [("epoch", 0), ("dram", 0)],
        now=lambda: 0.0,
        cases=2,
        builds=1,
        headline=frozenset(costs),
    )
    assert plan.plan_lines()[0] == (
        "gpubench: plan for the 5m budget: 2 headline cases first, each whole (~6m48s by "
        "the cost model's prices; more than the time left: their own first steps decide)"
    )
    assert plan.promise() == ["epoch", "dram"]


def test_headline_cases_run_cheapest_first_and_the_rest_keep_their_order():
    from gpubench.harness.budget.plan import run_order

    costs = {
        "tta": CaseCost(400.0, 30.0, predicted=True),
        "epoch": CaseCost(30.0, 29.0, history=True),
        "matmul": CaseCost(1.0, 0.1, predicted=True),
        "micro": CaseCost(0.2, 0.01),
    }
    order = [("tta", 0), ("micro", 0), ("epoch", 0), ("matmul", 0), ("epoch", 1), ("unknown", 0)]
    headline = frozenset({"tta", "epoch", "matmul"})
    ran = sorted(order, key=lambda item: run_order(item[0], item[1], headline, costs))
    # a slow headline case can take only what the cheaper ones leave, never their time
    assert ran == [
        ("matmul", 0),
        ("epoch", 0),
        ("tta", 0),
        ("micro", 0),
        ("unknown", 0),
        ("epoch", 1),
    ]


def test_a_cheap_headline_first_in_its_build_is_never_starved_by_the_guesses_after_it():
    """Beside a spinning process a 0.45 s transformer step got a 0.9 s share (twice its price, all
    the cost model's guesses for the 16 headline cases after it kept back) and its build's first
    touches took 2.5 s: skipped."""
    costs = {
        "tiny": CaseCost(0.45, 0.01, predicted=True),
        "epoch": CaseCost(300.0, 299.0, predicted=True),
    }
    plan = BudgetPlan(
        300.0,
        300.0,
        costs,
        [("tiny", 0), ("epoch", 0)],
        now=lambda: 0.0,
        cases=2,
        builds=1,
        headline=frozenset(costs),
    )
    assert plan.share_for("tiny").share_s == pytest.approx(300.0)
    measured = BudgetPlan(
        300.0,
        300.0,
        {"tiny": CaseCost(0.45, 0.01, history=True), "epoch": CaseCost(295.0, 294.0, history=True)},
        [("tiny", 0), ("epoch", 0)],
        now=lambda: 0.0,
        cases=2,
        builds=1,
        headline=frozenset(costs),
    )
    # a measured price after it is kept back, but never below the floor a build's first case needs
    assert measured.share_for("tiny").share_s == pytest.approx(10.0)


@pytest.mark.parametrize(
    "seconds, text",
    [(0.012, "12 ms"), (0.0004, "0.4 ms"), (0.25, "0.2 s"), (2.1, "2.1 s"), (151, "2m31s")],
)
def test_a_duration_reads_as_measured_never_zero(seconds, text):
    assert format_duration(seconds) == text
