"""The epoch race: the truly fastest contestant wins, one that cannot run or fails is skipped with
its reason, the race fits its budget and its winner is kept per machine. Fake step costs on a fake
clock: no training here (the time-to-accuracy candidates that follow the winner:
tests/test_time_to_accuracy.py)."""

import json
import os
from dataclasses import replace

import pytest
import torch
from fakes import SteppingClock

from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.measurement.timing import SyncedClock
from gpubench.harness.workloads.common import epoch_race as er

CPU = torch.device("cpu")
PLAN = er.RacePlan(steps=50, cap_s=10.0, warmup_steps=2)
QUICK = er.RACE_PLANS["quick"]
NOBODY_SKIPS = lambda contestant: None  # noqa: E731


def costed_steps(clock: SteppingClock, cost_s: dict[str, float], first_s: float = 0.0):
    """Steps that move the fake clock by their contestant's cost; each contestant's first call also
    costs `first_s` (a warm-up's price, which must never count)."""

    def make(contestant: er.Contestant):
        calls = []

        def step() -> None:
            clock.now_s += cost_s[contestant.name] + (first_s if not calls else 0.0)
            calls.append(1)

        return step

    return make


def test_the_contestant_with_the_cheapest_step_wins_and_warm_up_is_not_timed():
    clock = SteppingClock()
    # fp32, fp32-cl, fp16, fp16-cl
    contestants = er.CONTESTANTS[:4]
    costs = {"fp32": 0.04, "fp32-cl": 0.03, "fp16": 0.05, "fp16-cl": 0.035}
    result = er.race(
        contestants, costed_steps(clock, costs, first_s=100.0), NOBODY_SKIPS, PLAN, clock, "k"
    )
    assert result.winner.name == "fp32-cl"
    by = {e.name: e for e in result.entries}
    # warm-up's 100 s first call stays out of every figure
    for name, cost_s in costs.items():
        assert by[name].steps == PLAN.steps and by[name].steps_per_s == pytest.approx(1 / cost_s)
        assert by[name].samples_per_s == pytest.approx(er.RACE_BATCH / cost_s)
    assert (
        result.summary().startswith("raced on this machine: fp32-cl won: fp32 25 steps/s")
        and "fp32-cl 33.3 steps/s (won)" in result.summary()
    )


def test_a_slow_contestant_stops_at_its_time_cap():
    clock = SteppingClock()
    contestants = (er.Contestant("fp32", False), er.Contestant("bf16", False))
    result = er.race(
        contestants,
        costed_steps(clock, {"fp32": 0.01, "bf16": 3.0}),
        NOBODY_SKIPS,
        PLAN,
        clock,
        "k",
    )
    slow = result.entries[1]
    # the step that crossed 10 s ended its run
    assert slow.steps == 4 and slow.seconds == pytest.approx(12.0)
    assert result.winner.name == "fp32"


def test_a_contestant_that_cannot_run_or_fails_is_skipped_with_its_reason():
    clock = SteppingClock()
    costs = {c.name: 0.01 for c in er.CONTESTANTS}
    steps = costed_steps(clock, costs)

    def make(contestant: er.Contestant):
        if contestant.name == "bf16-cl":
            raise RuntimeError("no kernel for\nthis layout")
        return steps(contestant)

    skip = lambda c: "fp16 has no fast kernels here" if c.precision == "fp16" else None  # noqa: E731
    # the fastest that runs
    costs["bf16"] = 0.001
    result = er.race(er.CONTESTANTS, make, skip, PLAN, clock, "k")
    by = {e.name: e for e in result.entries}
    assert by["fp16"].status == "skipped" and by["fp16"].reason == "fp16 has no fast kernels here"
    assert by["bf16-cl"].status == "skipped" and by["bf16-cl"].reason.startswith(
        "failed: RuntimeError: no kernel for"
    )
    assert result.winner.name == "bf16" and "bf16-cl skipped (failed: " in result.summary()


def test_with_no_contestant_finished_the_fallback_is_named():
    clock = SteppingClock()
    result = er.race(er.CONTESTANTS, costed_steps(clock, {}), lambda c: "cannot", PLAN, clock, "k")
    assert result.winner == er.FALLBACK and "no contestant finished: fp32 used" in result.summary()


def test_the_race_fits_its_budget():
    clock = SteppingClock()
    contestants = er.CONTESTANTS[:2]
    result = er.race(
        contestants,
        costed_steps(clock, {"fp32": 0.5, "fp32-cl": 0.5}),
        NOBODY_SKIPS,
        PLAN,
        clock,
        "k",
        budget_s=4.0,
    )
    # each its equal part of the 4 s: half warm-up, half timed steps, not the plan's 10 s cap
    assert [e.seconds for e in result.entries] == [1.0, 1.0] and clock.now_s == pytest.approx(104.0)
    # cut short: not kept for later runs
    assert not result.complete
    clock = SteppingClock(0.0)
    slow = er.race(
        er.CONTESTANTS[:3],
        costed_steps(clock, {"fp32": 0.5, "fp32-cl": 0.5, "fp16": 0.5}, first_s=5.0),
        NOBODY_SKIPS,
        PLAN,
        clock,
        "k",
        budget_s=12.0,
    )
    assert [e.status for e in slow.entries] == ["ok", "ok", "skipped"]
    # each: one 5.5 s warm-up call (past its 2 s cap, no second), 2 s timed
    assert clock.now_s == pytest.approx(15.0)
    assert (
        slow.entries[2].reason == "the race's 12 s of the budget was spent"
        and slow.winner.name == "fp32"
    )
    assert er.race(
        er.CONTESTANTS[:2],
        costed_steps(clock, {"fp32": 0.5, "fp32-cl": 0.5}),
        NOBODY_SKIPS,
        PLAN,
        clock,
        "k",
    ).complete
    overrun = er.race(
        er.CONTESTANTS[:2],
        costed_steps(clock, {"fp32": 0.5, "fp32-cl": 0.5}, first_s=50.0),
        # the plan's full 10 s cap each, but a warm-up ran past the budget
        NOBODY_SKIPS,
        PLAN,
        clock,
        "k",
        budget_s=40.0,
    )
    assert overrun.entries[1].status == "skipped" and not overrun.complete
    nothing = er.race(
        contestants, costed_steps(clock, {}), NOBODY_SKIPS, PLAN, clock, "k", budget_s=0.01
    )
    assert nothing.entries == () and nothing.winner == er.FALLBACK and "not raced" in nothing.note


class OneBatch:
    def preloaded(self, train, device):
        return torch.zeros(1, 1, 28, 28), torch.zeros(1, dtype=torch.long)


def race_context(tmp_path, machine="m1", profile="quick", data=None) -> BuildContext:
    never = lambda: pytest.fail("a kept race reads no data")  # noqa: E731
    return BuildContext(
        CPU,
        profile,
        SyncedClock(CPU),
        results_dir=tmp_path,
        machine_id=lambda: machine,
        data_source=(lambda: data) if data is not None else never,
    )


def test_the_winner_is_kept_per_machine_and_read_back_without_racing(tmp_path, monkeypatch):
    won = er.RaceResult("", (er.Entry("fp32", "ok", 200, 3.0), er.Entry("bf16-cl", "ok", 200, 1.0)))
    raced = []

    def fake_race(contestants, make_step, skip, plan, clock, key, budget_s=None):
        raced.append(key)
        return replace(won, key=key)

    monkeypatch.setattr(er, "race", fake_race)
    monkeypatch.setattr(er, "_RACED", {})
    assert (
        er.race_here(race_context(tmp_path, data=OneBatch())).winner.name == "bf16-cl"
        and len(raced) == 1
    )
    # a later run: a fresh process
    monkeypatch.setattr(er, "_RACED", {})
    # read from the file
    assert er.race_here(race_context(tmp_path)).winner.name == "bf16-cl" and len(raced) == 1
    assert er.load_cached(
        tmp_path / er.RACE_FILE, er.race_key("m2", CPU, "quick", er.CONTESTANTS), QUICK
    ) == (None, "")
    # another machine above; this one here
    kept, refused = er.load_cached(tmp_path / er.RACE_FILE, raced[0], QUICK)
    assert (
        kept.entries == won.entries
        and refused == ""
        and kept.summary().startswith("kept from an earlier race")
    )
    # a race the budget cut short
    won = replace(won, complete=False)
    monkeypatch.setattr(er, "_RACED", {})
    (tmp_path / "other").mkdir()
    assert (
        er.race_here(race_context(tmp_path / "other", "m2", "full", OneBatch())).winner.name
        == "bf16-cl"
    )
    key = raced[-1]
    assert er.load_cached(tmp_path / "other" / er.RACE_FILE, key, er.RACE_PLANS["full"]) == (
        # shown in the file, not reused
        None,
        "the kept race was cut short by a budget",
    )
    assert json.loads((tmp_path / "other" / er.RACE_FILE).read_text())[key]["winner"] == "bf16-cl"


def planted(entries, **race):
    return {"complete": True, "note": "", "winner": "bf16", "entries": entries, **race}


OK_BF16 = {
    "name": "bf16",
    "status": "ok",
    "steps": 200,
    "seconds": 0.5,
    "samples_per_step": 256,
    "reason": "",
}
# what a team member could leave in a shared results folder, and what the row then says
DOUBTFUL = {
    "another owner": ([OK_BF16], {}, "not by you (uid"),
    "writable by others": ([OK_BF16], {}, "writable by others"),
    "an unknown setting": ([dict(OK_BF16, name="fp8-turbo")], {}, "an entry names no contestant"),
    "steps as text": ([dict(OK_BF16, steps="200")], {}, "bf16: not an ok or skipped entry"),
    "an impossible speed": (
        [dict(OK_BF16, seconds=1e-9)],
        {},
        "bf16: 200 steps in 1e-09 s, impossible",
    ),
    "more steps than the plan": (
        [dict(OK_BF16, steps=10**9, seconds=1e5)],
        {},
        "impossible under the 200-step plan",
    ),
    "stopped early": (
        [dict(OK_BF16, steps=10, seconds=0.1)],
        {},
        "bf16: 10 steps in 0.1 s, stopped before",
    ),
    "an empty complete race": ([], {}, "no contestant finished"),
    "a huge reason": (
        [
            OK_BF16,
            {
                "name": "fp16",
                "status": "skipped",
                "steps": 0,
                "seconds": 0.0,
                "samples_per_step": 256,
                "reason": "x" * 100_000,
            },
        ],
        {},
        "fp16: an odd skip",
    ),
    "a huge note": (
        [OK_BF16],
        {"note": "y" * 100_000},
        "it holds no list of entries and short note",
    ),
    "a folder at its name": (None, {}, "a folder, not a regular file"),
}


@pytest.mark.parametrize("kind", DOUBTFUL)
def test_a_doubtful_kept_race_is_raced_again_and_the_row_says_why(tmp_path, monkeypatch, kind):
    entries, race_fields, why = DOUBTFUL[kind]
    ctx = race_context(tmp_path, data=OneBatch())
    key = er.race_key("m1", CPU, "quick", er.CONTESTANTS)
    path = tmp_path / er.RACE_FILE
    if entries is None:
        path.mkdir()
    else:
        path.write_text(json.dumps({key: dict(planted(entries, **race_fields), key=key)}))
        path.chmod(0o666 if kind == "writable by others" else 0o644)
    fresh = er.RaceResult(key, (er.Entry("fp32", "ok", 200, 1.0),))
    monkeypatch.setattr(er, "race", lambda *args, **kwargs: fresh)
    monkeypatch.setattr(er, "_RACED", {})
    with monkeypatch.context() as as_another_user:
        # the file is someone else's when we are not its owner
        if kind == "another owner":
            as_another_user.setattr(os, "geteuid", lambda: path.stat().st_uid + 1)
        result = er.race_here(ctx)
    # raced again: the planted bf16 is not named
    assert result.winner.name == "fp32"
    summary = result.summary()
    assert (
        summary.startswith("raced on this machine (the kept race was not used: ") and why in summary
    )
    assert len(summary) < 1000
    if entries is None:
        # the folder stays; the row says the race could not be kept
        assert "not kept: " in summary
    else:
        # our own race replaced the planted one
        assert er.load_cached(path, key, QUICK)[0].winner.name == "fp32"
