"""--budget's history is evidence: only the user's own files, only rows that can be true, the newest
of them by time, a bounded read made once per run, and never a reason to skip a case before a call
of its own in this run."""

import os
import time
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest

from gpubench.harness.budget.shares import CaseCost
from gpubench.harness.pytest_plugin import budget_hooks
from gpubench.harness.budget.plan import BudgetPlan
from gpubench.harness.records import durations
from gpubench.harness.records.durations import case_costs, history
from gpubench.harness.records.results import ResultsWriter
from gpubench.harness.records.schema import SCHEMA_VERSION

CASE = "matmul/fp32-n64"
NOW = datetime(2026, 11, 10, 12, 0, tzinfo=timezone.utc)
AS_ROOT = pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root: files of another owner are made with os.chown"
)


def write_run(folder, run_id, *rows, machine="m1"):
    """One run's file: each row (stamp, build s, first call s, case id)."""
    writer = ResultsWriter(folder, run_id)
    for stamp, build_s, first_call_s, case_id in rows:
        writer.append(
            {
                "schema_version": SCHEMA_VERSION,
                "run_id": run_id,
                "timestamp_utc": stamp,
                "machine_id": machine,
                "hostname": "h",
                "device": "cpu",
                "device_name": "x",
                "torch_version": "2",
                "cuda_version": "",
                "workload": "matmul",
                "case_id": case_id,
                "status": "ok",
                "reason": "",
                "build_s": build_s,
                "first_call_s": first_call_s,
                "profile": "quick",
            }
        )
    writer.close()
    return folder / f"{run_id}.csv"


def stamp(delta=timedelta(0)):
    return (NOW + delta).isoformat()


def history_of(folder):
    return history(folder, "m1", "cpu", "quick", now_s=NOW.timestamp())


@AS_ROOT
def test_a_teammates_file_in_the_machine_folder_is_no_history_of_mine(tmp_path):
    write_run(tmp_path, "mine", (stamp(-timedelta(days=1)), 3.0, 0.5, CASE))
    # the fault campaign's plant: a teammate's file, a timestamp years ahead and a week a call
    theirs = write_run(tmp_path, "theirs", ("2035-01-01T00:00:00+00:00", 604800.0, 604800.0, CASE))
    os.chown(theirs, 12345, 12345)
    found = history_of(tmp_path)
    assert found.costs == {CASE: CaseCost(3.0, 0.5, history=True)}
    assert found.note() == "history: 1 file not yours passed over"


def test_rows_that_cannot_be_true_are_set_aside_and_counted_once(tmp_path):
    write_run(
        tmp_path,
        "run",
        (stamp(-timedelta(days=2)), 3.0, 0.5, CASE),
        # dated ahead of this clock
        (stamp(timedelta(days=365)), 9.0, 0.5, CASE),
        # a build and a call of no time at all
        (stamp(-timedelta(days=1)), 0.0, 0.0, CASE),
        (stamp(-timedelta(hours=20)), 2.0, 0.0, CASE),
        # a few minutes' clock skew is allowed
        (stamp(timedelta(minutes=5)), 4.0, 0.25, "matmul/fp32-n32"),
    )
    found = history_of(tmp_path)
    assert found.costs == {
        CASE: CaseCost(3.0, 0.5, history=True),
        "matmul/fp32-n32": CaseCost(4.0, 0.25, history=True),
    }
    # a build past the longest timed region (10^6 s) is refused with its file by the reader
    # (test_schema)
    assert found.note() == (
        "history: 3 rows set aside (1 dated ahead of this clock, 2 with 0 s, non-finite or "
        "11-day-long seconds)"
    )


def test_the_newest_row_is_decided_by_its_time_not_its_text(tmp_path):
    # 01:00 at +05:00 is 20:00 UTC the day before: older than 22:00 UTC, though its text sorts after
    # it
    write_run(tmp_path, "a", ("2026-11-02T01:00:00+05:00", 9.0, 0.5, CASE))
    write_run(tmp_path, "b", ("2026-11-01T22:00:00+00:00", 3.0, 0.5, CASE))
    assert history_of(tmp_path).costs == {CASE: CaseCost(3.0, 0.5, history=True)}


def test_only_the_newest_runs_up_to_a_byte_cap_are_read(tmp_path, monkeypatch):
    paths = [
        write_run(
            tmp_path,
            f"r{k}",
            (stamp(-timedelta(days=9 - k)), float(k + 1), 0.5, f"matmul/fp32-n{k}"),
        )
        for k in range(4)
    ]
    # the files' own times say which runs are newest
    for k, path in enumerate(paths):
        os.utime(path, (time.time() - 1000 + k, time.time() - 1000 + k))
    size = max(path.stat().st_size for path in paths)
    read = []
    monkeypatch.setattr(
        durations, "read_frame", lambda path: read.append(path.name) or real_read(path)
    )
    monkeypatch.setattr(durations, "MAX_HISTORY_BYTES", 2 * size)
    found = history_of(tmp_path)
    assert sorted(read) == ["r2.csv", "r3.csv"] and set(found.costs) == {
        "matmul/fp32-n2",
        "matmul/fp32-n3",
    }
    assert "runs older than the newest" in found.note()


def real_read(path):
    from gpubench.harness.records.results_reader import read_frame

    return read_frame(path)


def test_a_later_build_prices_from_its_runs_file_and_reads_no_history(tmp_path, monkeypatch):
    write_run(tmp_path, "old", (stamp(-timedelta(days=3)), 7.0, 0.5, CASE))
    run_file = write_run(tmp_path, "this", (stamp(), 2.0, 0.25, CASE))
    read = []
    monkeypatch.setattr(
        durations, "read_frame", lambda path: read.append(path.name) or real_read(path)
    )
    state = SimpleNamespace(
        only_build=1,
        ctx=SimpleNamespace(device="cpu", profile="quick"),
        records=SimpleNamespace(
            csv_path=run_file,
            results_dir=tmp_path,
            fingerprint_of=lambda device: {"machine_id": "m1"},
        ),
    )
    found = budget_hooks.known_costs(state)
    # this run's own first build: a price that may skip a case before it is built, as it ran here
    # and now
    assert read == ["this.csv"] and found.costs == {CASE: CaseCost(2.0, 0.25)}
    state.only_build = 0
    # the first build reads the machine's earlier runs
    assert budget_hooks.known_costs(state).costs[CASE].history


def test_history_that_says_a_call_cannot_fit_still_gives_the_case_one_call():
    # a probe taken at a bad moment (a busy machine): 25 s a call, for a case that runs in
    # milliseconds
    plan = BudgetPlan(
        180.0,
        20.0,
        {"a": CaseCost(30.0, 25.0, history=True), "b": CaseCost(10.0)},
        [("a", 0), ("b", 0)],
        now=lambda: 0.0,
        cases=2,
        builds=1,
    )
    # even once this process knows its pace
    plan.seen.append((1.0, 1.0))
    share = plan.share_for("a")
    # the case's own first call decides
    assert share.known_call_s is None and share.share_s > 0
    assert not any("skipped" in line or "left out" in line for line in plan.plan_lines())


def test_the_cost_model_may_still_skip_a_case_whose_history_says_it_cannot_fit():
    costs = {"a": CaseCost(300.0, 250.0, history=True, model_call_s=200.0), "b": CaseCost(10.0)}
    plan = BudgetPlan(180.0, 100.0, costs, [("a", 0), ("b", 0)], now=lambda: 0.0, cases=2, builds=1)
    # before this process has seen how far the prices are off
    assert plan.share_for("a").known_call_s is None
    plan.seen.append((2.0, 2.0))
    share = plan.share_for("a")
    assert share.known_call_s == pytest.approx(200.0)
    assert share.over(share.known_call_s).startswith(
        "over budget: one call takes 3m20s (the cost model's price; "
        "this machine's history said 4m10s); its share"
    )
    # a call measured here is no price: no source named
    assert "(" not in share.over(190.0).split(";")[0]


def test_the_plan_line_says_what_history_passed_over():
    plan = BudgetPlan(
        180.0,
        100.0,
        {},
        [("a", 0)],
        now=lambda: 0.0,
        cases=1,
        builds=1,
        history_note="history: 1 file not yours passed over",
    )
    assert plan.plan_lines()[-1] == "gpubench: history: 1 file not yours passed over"


def test_the_run_file_of_a_later_build_keeps_the_rule_of_this_runs_own_rows(tmp_path):
    run_file = write_run(tmp_path, "this", (stamp(), 2.0, 0.25, CASE))
    found = case_costs([run_file], "m1", "cpu", "quick", now_s=NOW.timestamp(), from_history=False)
    assert found.costs == {CASE: CaseCost(2.0, 0.25)} and found.note() is None
