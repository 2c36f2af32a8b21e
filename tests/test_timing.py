import pytest
import torch

from harness import timing
from harness.timing import Budget, RoundPlan, Stopwatch, measure, plan_rounds, sample, warm_up


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
    timing.set_active_device(torch.device("cpu"), clock)
    clock.syncs = syncs
    yield clock
    timing.set_active_device(torch.device("cpu"), __import__("time").perf_counter)


def test_synced_clock_synchronizes_before_reading(fake_clock):
    assert timing.synced_clock() == 100.0
    assert fake_clock.syncs == [torch.device("cpu")]


def test_sample_returns_seconds_per_call_and_syncs_only_at_round_edges(fake_clock):
    samples = sample(fake_clock.work, RoundPlan(0, iterations=5, rounds=3, estimate_s=0.002))
    assert samples == pytest.approx([0.002] * 3)
    assert fake_clock.calls == 15
    assert len(fake_clock.syncs) == 6  # start and end of each round, none per call


def test_warm_up_calls_never_enter_samples(fake_clock):
    plan, samples = measure(fake_clock.work, Budget(target_s=0.02, min_round_s=0.001, min_rounds=2, max_rounds=50, warmup_calls=3))
    assert fake_clock.calls == 3 + plan.rounds * plan.iterations
    assert len(samples) == plan.rounds


def test_warm_up_stops_early_for_slow_cases(fake_clock):
    fake_clock.cost_s = 5.0
    assert warm_up(fake_clock.work, calls=5, max_s=1.0) == 5.0
    assert fake_clock.calls == 2


def test_plan_rounds_fills_short_rounds_and_the_budget():
    plan = plan_rounds(1e-5, Budget(target_s=0.5, min_round_s=1e-3, min_rounds=5, max_rounds=200))
    assert plan.iterations == 100  # 100 calls of 10 us make a 1 ms round
    assert plan.rounds == 200  # 500 rounds would fit; capped
    slow = plan_rounds(2.0, Budget(target_s=0.5, min_round_s=1e-3, min_rounds=5, max_rounds=200))
    assert (slow.iterations, slow.rounds) == (1, 5)  # min_rounds even past the budget


def test_stopwatch_accumulates_spans(fake_clock):
    watch = Stopwatch()
    for _ in range(3):
        watch.start(sync=False)
        fake_clock.work()
        watch.stop(sync=False)
    assert watch.total_s == pytest.approx(0.006)
    assert fake_clock.syncs == []  # unsynced spans read the host clock only
