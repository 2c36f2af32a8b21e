import pytest
import torch

from gpubench.harness.measurement import timing
from gpubench.harness.measurement.measure import Timed, measure
from gpubench.harness.core.plan import BuildTiming, RoundPlan, plan_rounds
from gpubench.harness.measurement.loop import run_batches, sample, warm_up
from gpubench.harness.measurement.timing import Stopwatch, SyncedClock


class FakeClock:
    """Advances only when work 'runs': each call of `work` costs `cost_s`."""

    def __init__(self, cost_s: float) -> None:
        self.now = 100.0
        self.cost_s = cost_s
        self.calls = 0

    def __call__(self) -> float:
        return self.now

    def work(self) -> None:
        self.calls += 1
        self.now += self.cost_s


@pytest.fixture
def fake_clock(monkeypatch):
    clock = FakeClock(0.002)
    syncs = []
    monkeypatch.setattr(timing, "synchronize", lambda device: syncs.append(device))
    clock.syncs = syncs
    clock.synced = SyncedClock(torch.device("cpu"), clock)
    return clock


def test_synced_clock_synchronizes_before_reading(fake_clock):
    assert fake_clock.synced() == 100.0
    assert fake_clock.syncs == [torch.device("cpu")]
    # how pytest-benchmark names the timer
    assert fake_clock.synced.__name__ == "synced_clock"


def test_sample_returns_seconds_per_call_and_syncs_only_at_round_edges(fake_clock):
    samples = sample(
        fake_clock.work, RoundPlan(0, iterations=5, rounds=3, estimate_s=0.002), fake_clock.synced
    )
    assert samples == pytest.approx([0.002] * 3)
    assert fake_clock.calls == 15
    # start and end of each round, none per call
    assert len(fake_clock.syncs) == 6


def test_warm_up_and_calibration_calls_never_enter_samples(fake_clock):
    m = measure(
        Timed(fn=fake_clock.work),
        BuildTiming(target_s=0.02, min_round_s=0.001, min_rounds=2, max_rounds=50, warmup_calls=3),
        fake_clock.synced,
    )
    # one whole round, still warm-up
    calibration = m.plan.iterations if m.plan.iterations > 1 else 0
    assert fake_clock.calls == 3 + calibration + m.plan.rounds * m.plan.iterations
    assert len(m.samples_s) == m.plan.rounds and m.calls == m.plan.rounds * m.plan.iterations
    assert m.stats.median_s == pytest.approx(0.002)


def test_warm_up_stops_early_for_slow_cases(fake_clock):
    fake_clock.cost_s = 5.0
    assert warm_up(fake_clock.work, calls=5, clock=fake_clock.synced, max_s=1.0) == 5.0
    assert fake_clock.calls == 2


def test_plan_rounds_fills_short_rounds_and_the_budget():
    plan = plan_rounds(
        1e-5, BuildTiming(target_s=0.5, min_round_s=1e-3, min_rounds=5, max_rounds=200)
    )
    # 100 calls of 10 us make a 1 ms round; planned with a 1.5x margin
    assert plan.iterations == 150
    # 333 rounds would fit; capped
    assert plan.rounds == 200
    slow = plan_rounds(
        2.0, BuildTiming(target_s=0.5, min_round_s=1e-3, min_rounds=5, max_rounds=200)
    )
    # min_rounds even past the budget
    assert (slow.iterations, slow.rounds) == (1, 5)


def test_plan_rounds_reaches_the_minimum_calls_past_max_rounds():
    budget = BuildTiming(target_s=0.05, min_round_s=1e-3, min_rounds=3, max_rounds=5, min_calls=20)
    # a 10 ms call: 5 rounds would fill the 0.05 s, the calls ask for 20
    slow = plan_rounds(0.01, budget)
    assert (slow.iterations, slow.rounds) == (1, 20)
    # 150 calls a round: the rounds' cap already holds more than 20 calls
    fast = plan_rounds(1e-5, budget)
    assert (fast.iterations, fast.rounds) == (150, 5)


def test_stopwatch_accumulates_spans(fake_clock):
    watch = Stopwatch(fake_clock.synced)
    for _ in range(3):
        watch.start(sync=False)
        fake_clock.work()
        watch.stop(sync=False)
    assert watch.total_s == pytest.approx(0.006)
    # unsynced spans read the host clock only
    assert fake_clock.syncs == []


def test_the_loop_runs_the_batches_its_hook_asks_for_and_keeps_results_only_when_told(fake_clock):
    asked = []

    def next_batch(done):
        asked.append(list(done.calls))
        return [3, 1, 0][len(done.calls)]

    def work():
        fake_clock.work()
        return fake_clock.calls

    dropped = run_batches(work, fake_clock.synced, next_batch)
    assert asked == [[], [3], [3, 1]] and dropped.calls == [3, 1] and dropped.total_calls == 4
    # no output kept alive
    assert dropped.per_call_s() == pytest.approx([0.002, 0.002]) and dropped.result is None
    asked.clear()
    # the rounds' last result
    assert run_batches(work, fake_clock.synced, next_batch, keep_result=True).result == 8
