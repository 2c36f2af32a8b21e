"""The epoch race: the truly fastest contestant wins, one that cannot run or fails is skipped with its reason, the
race fits its budget and its winner is kept per machine. Fake step costs on a fake clock: no training here (the
time-to-accuracy candidates that follow the winner: tests/test_time_to_accuracy.py)."""

import json
from dataclasses import replace

import pytest
import torch
from fakes import SteppingClock

from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.measurement.timing import SyncedClock
from gpubench.harness.workloads import epoch_race as er

CPU = torch.device("cpu")
PLAN = er.RacePlan(steps=50, cap_s=10.0, warmup_steps=2)
NOBODY_SKIPS = lambda contestant: None  # noqa: E731


def costed_steps(clock: SteppingClock, cost_s: dict[str, float], first_s: float = 0.0):
    """Steps that move the fake clock by their contestant's cost; each contestant's first call also costs `first_s`
    (a warm-up's price, which must never count)."""
    def make(contestant: er.Contestant):
        calls = []

        def step() -> None:
            clock.now_s += cost_s[contestant.name] + (first_s if not calls else 0.0)
            calls.append(1)

        return step

    return make


def test_the_contestant_with_the_cheapest_step_wins_and_warm_up_is_not_timed():
    clock = SteppingClock()
    contestants = er.CONTESTANTS[:4]  # fp32, fp32-cl, fp16, fp16-cl
    costs = {"fp32": 0.04, "fp32-cl": 0.03, "fp16": 0.05, "fp16-cl": 0.035}
    result = er.race(contestants, costed_steps(clock, costs, first_s=100.0), NOBODY_SKIPS, PLAN, clock, "k")
    assert result.winner.name == "fp32-cl"
    by = {e.name: e for e in result.entries}
    for name, cost_s in costs.items():  # warm-up's 100 s first call stays out of every figure
        assert by[name].steps == PLAN.steps and by[name].steps_per_s == pytest.approx(1 / cost_s)
        assert by[name].samples_per_s == pytest.approx(er.RACE_BATCH / cost_s)
    assert result.summary().startswith("raced on this machine: fp32-cl won: fp32 25 steps/s") and "fp32-cl 33.3 steps/s (won)" in result.summary()


def test_a_slow_contestant_stops_at_its_time_cap():
    clock = SteppingClock()
    contestants = (er.Contestant("fp32", False), er.Contestant("bf16", False))
    result = er.race(contestants, costed_steps(clock, {"fp32": 0.01, "bf16": 3.0}), NOBODY_SKIPS, PLAN, clock, "k")
    slow = result.entries[1]
    assert slow.steps == 4 and slow.seconds == pytest.approx(12.0)  # the step that crossed 10 s ended its run
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
    costs["bf16"] = 0.001  # the fastest that runs
    result = er.race(er.CONTESTANTS, make, skip, PLAN, clock, "k")
    by = {e.name: e for e in result.entries}
    assert by["fp16"].status == "skipped" and by["fp16"].reason == "fp16 has no fast kernels here"
    assert by["bf16-cl"].status == "skipped" and by["bf16-cl"].reason.startswith("failed: RuntimeError: no kernel for")
    assert result.winner.name == "bf16" and "bf16-cl skipped (failed: " in result.summary()


def test_with_no_contestant_finished_the_fallback_is_named():
    clock = SteppingClock()
    result = er.race(er.CONTESTANTS, costed_steps(clock, {}), lambda c: "cannot", PLAN, clock, "k")
    assert result.winner == er.FALLBACK and "no contestant finished: fp32 used" in result.summary()


def test_the_race_fits_its_budget():
    clock = SteppingClock()
    contestants = er.CONTESTANTS[:2]
    result = er.race(contestants, costed_steps(clock, {"fp32": 0.5, "fp32-cl": 0.5}), NOBODY_SKIPS, PLAN, clock, "k", budget_s=4.0)
    # each its equal part of the 4 s: half warm-up, half timed steps, not the plan's 10 s cap
    assert [e.seconds for e in result.entries] == [1.0, 1.0] and clock.now_s == pytest.approx(104.0)
    assert not result.complete  # cut short: not kept for later runs
    clock = SteppingClock(0.0)
    slow = er.race(er.CONTESTANTS[:3], costed_steps(clock, {"fp32": 0.5, "fp32-cl": 0.5, "fp16": 0.5}, first_s=5.0),
                   NOBODY_SKIPS, PLAN, clock, "k", budget_s=12.0)
    assert [e.status for e in slow.entries] == ["ok", "ok", "skipped"]
    assert clock.now_s == pytest.approx(15.0)  # each: one 5.5 s warm-up call (past its 2 s cap, no second), 2 s timed
    assert slow.entries[2].reason == "the race's 12 s of the budget was spent" and slow.winner.name == "fp32"
    assert er.race(er.CONTESTANTS[:2], costed_steps(clock, {"fp32": 0.5, "fp32-cl": 0.5}), NOBODY_SKIPS, PLAN, clock, "k").complete
    overrun = er.race(er.CONTESTANTS[:2], costed_steps(clock, {"fp32": 0.5, "fp32-cl": 0.5}, first_s=50.0), NOBODY_SKIPS,
                      PLAN, clock, "k", budget_s=40.0)  # the plan's full 10 s cap each, but a warm-up ran past the budget
    assert overrun.entries[1].status == "skipped" and not overrun.complete
    nothing = er.race(contestants, costed_steps(clock, {}), NOBODY_SKIPS, PLAN, clock, "k", budget_s=0.01)
    assert nothing.entries == () and nothing.winner == er.FALLBACK and "not raced" in nothing.note


class OneBatch:
    def preloaded(self, train, device):
        return torch.zeros(1, 1, 28, 28), torch.zeros(1, dtype=torch.long)


def race_context(tmp_path, machine="m1", profile="quick", data=None) -> BuildContext:
    never = lambda: pytest.fail("a kept race reads no data")  # noqa: E731
    return BuildContext(CPU, profile, SyncedClock(CPU), results_dir=tmp_path, machine_id=lambda: machine,
                        data_source=(lambda: data) if data is not None else never)


def test_the_winner_is_kept_per_machine_and_read_back_without_racing(tmp_path, monkeypatch):
    won = er.RaceResult("", (er.Entry("fp32", "ok", 10, 1.0), er.Entry("bf16-cl", "ok", 30, 1.0)))
    raced = []

    def fake_race(contestants, make_step, skip, plan, clock, key, budget_s=None):
        raced.append(key)
        return replace(won, key=key)

    monkeypatch.setattr(er, "race", fake_race)
    monkeypatch.setattr(er, "_RACED", {})
    assert er.race_here(race_context(tmp_path, data=OneBatch())).winner.name == "bf16-cl" and len(raced) == 1
    monkeypatch.setattr(er, "_RACED", {})  # a later run: a fresh process
    assert er.race_here(race_context(tmp_path)).winner.name == "bf16-cl" and len(raced) == 1  # read from the file
    assert er.load_cached(tmp_path / er.RACE_FILE, er.race_key("m2", CPU, "quick", er.CONTESTANTS)) is None  # another machine
    assert er.load_cached(tmp_path / er.RACE_FILE, raced[0]).entries == won.entries
    won = replace(won, complete=False)  # a race the budget cut short
    monkeypatch.setattr(er, "_RACED", {})
    (tmp_path / "other").mkdir()
    assert er.race_here(race_context(tmp_path / "other", "m2", "full", OneBatch())).winner.name == "bf16-cl"
    key = raced[-1]
    assert er.load_cached(tmp_path / "other" / er.RACE_FILE, key) is None  # shown in the file, not reused
    assert json.loads((tmp_path / "other" / er.RACE_FILE).read_text())[key]["winner"] == "bf16-cl"
