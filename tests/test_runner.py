import pytest
import torch
from fakes import FakeBenchmark, RunContext, run_with

from gpubench.harness.devices import device as devices
from gpubench.harness.measurement.cases import CaseSkipped, Diverged
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.devices.device import is_out_of_memory
from gpubench.harness.measurement.measure import Timed
from gpubench.harness.core.plan import BuildTiming, RoundPlan
from gpubench.harness.records.results import ResultsWriter
from gpubench.harness.records.results_reader import read_rows
from gpubench.harness.core.bounds import past_bounds
from gpubench.harness.measurement.runner import quality_flags
from gpubench.harness.records.schema import SCHEMA_VERSION
from gpubench.harness.core.stats import summarize
from gpubench.harness.measurement.terminal import summary_line
from gpubench.harness.measurement.timing import SyncedClock
from gpubench.harness.workloads import selfcheck
from gpubench.harness.workloads.matmul import MatmulCase
from gpubench.harness.workloads.common.epoch import EpochCase

CPU = torch.device("cpu")


class Workload:
    """A workload whose set-up is the given function (the protocol: cases/set_up)."""

    def __init__(self, set_up):
        self.set_up = set_up

    def cases(self, ctx):
        return []


@pytest.fixture
def ctx(tmp_path):
    writer = ResultsWriter(tmp_path, "run")
    yield RunContext(
        BuildContext(CPU, "smoke", SyncedClock(CPU)),
        {"schema_version": SCHEMA_VERSION, "run_id": "run", "device_name": "NVIDIA H100 80GB HBM3"},
        writer,
    )
    writer.close()


def fixed(fn, figures=lambda s, r: {}):
    return Timed(fn=fn, figures=figures, plan=RoundPlan(1, 2, 3, 0.0))


def run(case, build, bench, ctx, build_index=0):
    return run_with(case, Workload(build), bench, ctx, build_index)


def test_ok_row_carries_stats_figures_and_raw_samples(ctx, tmp_path):
    calls = []
    bench = FakeBenchmark([0.004, 0.001, 0.002])
    build = lambda case, bctx: fixed(lambda: calls.append(1), lambda s, r: {"tflops": 1.5})  # noqa: E731
    row = run(MatmulCase("fp32", 64), build, bench, ctx)
    assert row["status"] == "ok"
    assert (
        row["median_s"] == 0.002
        and row["min_s"] == 0.001
        and row["rounds"] == 3
        and row["iterations"] == 2
    )
    assert row["samples_s"] == [0.004, 0.001, 0.002] and row["build"] == 0 and row["builds"] == 1
    assert row["iqr_outliers"] == 0 and row["rel_iqr"] == pytest.approx(row["iqr_s"] / 0.002)
    assert row["tflops"] == 1.5 and row["dtype"] == "fp32" and row["size"] == 64
    # one warm-up call, the rounds, and pytest-benchmark's call for the result
    assert len(calls) == 1 + 3 * 2 + 1
    assert read_rows(tmp_path / "run.csv")[0]["status"] == "ok"


def test_skipped_case_becomes_a_row(ctx, tmp_path):
    def build(case, bctx):
        raise CaseSkipped("tf32 is a CUDA tensor-core mode; not available on cpu")

    row = run(MatmulCase("tf32", 64), build, FakeBenchmark(), ctx)
    assert (row["status"], row["reason"]) == (
        "skipped",
        "tf32 is a CUDA tensor-core mode; not available on cpu",
    )
    assert read_rows(tmp_path / "run.csv")[0]["status"] == "skipped"


def test_out_of_memory_becomes_an_oom_row_and_the_run_goes_on(ctx):
    def build(case, bctx):
        def explode():
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")

        return fixed(explode)

    row = run(MatmulCase("fp32", 65536), build, FakeBenchmark(), ctx)
    assert row["status"] == "oom" and "out of memory" in row["reason"]
    assert (
        run(MatmulCase("fp32", 64), lambda c, x: fixed(lambda: None), FakeBenchmark(), ctx)[
            "status"
        ]
        == "ok"
    )


def test_cpu_out_of_memory_is_an_oom_row(tmp_path):
    message = (
        "[enforce fail at alloc_cpu.cpp:119] data. DefaultCPUAllocator: can't allocate memory: "
        "you tried to allocate 1099511627776 bytes. Error code 12 (Cannot allocate memory)"
    )
    assert is_out_of_memory(RuntimeError(message))
    assert is_out_of_memory(MemoryError())
    assert not is_out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))

    class Huge:
        @staticmethod
        def set_up(case, ctx):
            raise RuntimeError(message)

    writer = ResultsWriter(tmp_path, "run")
    row_out = run_with(
        MatmulCase("fp32", 64),
        Huge,
        FakeBenchmark(),
        RunContext(
            BuildContext(CPU, "smoke", SyncedClock(CPU)), {"schema_version": SCHEMA_VERSION}, writer
        ),
    )
    writer.close()
    assert row_out["status"] == "oom" and "can't allocate memory" in row_out["reason"]


def test_failure_is_recorded_then_raised(ctx, tmp_path):
    def build(case, bctx):
        raise ValueError("bad\nthing")

    with pytest.raises(ValueError):
        run(MatmulCase("fp32", 64), build, FakeBenchmark(), ctx)
    row = read_rows(tmp_path / "run.csv")[0]
    assert row["status"] == "failed" and row["reason"] == "ValueError: bad thing"


@pytest.mark.parametrize(
    "outcome, status, reason",
    [
        (lambda: pytest.skip("no such unit here"), "skipped", "no such unit here"),
        (
            lambda: pytest.fail("Timeout (>1.0s) from pytest-timeout."),
            "failed",
            "Timeout (>1.0s) from pytest-timeout.",
        ),
    ],
    ids=["skip", "fail"],
)
def test_pytests_own_outcomes_are_recorded_then_raised(ctx, tmp_path, outcome, status, reason):
    """pytest.skip()/pytest.fail() in a user's step, or pytest-timeout's cut, are BaseExceptions:
    the case still leaves its row (it had none), then pytest reports the outcome itself."""

    def build(case, bctx):
        outcome()

    with pytest.raises((pytest.skip.Exception, pytest.fail.Exception)):
        run(MatmulCase("fp32", 64), build, FakeBenchmark(), ctx)
    row = read_rows(tmp_path / "run.csv")[0]
    assert row["status"] == status and reason in row["reason"]


def test_cleanup_runs_even_on_failure(ctx):
    restored = []
    timed = Timed(
        fn=lambda: 1 / 0, cleanup=lambda: restored.append(True), plan=RoundPlan(0, 1, 1, 0.0)
    )
    with pytest.raises(ZeroDivisionError):
        run(MatmulCase("fp32", 64), lambda c, x: timed, FakeBenchmark(), ctx)
    assert restored == [True]


def test_negative_time_is_refused_as_impossible(ctx):
    row = None
    with pytest.raises(ValueError, match="impossible"):
        row = run(
            MatmulCase("fp32", 64),
            lambda c, x: fixed(lambda: None),
            FakeBenchmark([0.001, -0.002, 0.001]),
            ctx,
        )
    assert row is None


def test_noise_flags_use_the_iqr_not_one_outlier():
    budget = BuildTiming(min_round_s=1e-3)
    plan = RoundPlan(0, 10, 9, 0.0)
    # cv far above 5%, IQR/median 0
    one_outlier = summarize([1.0] * 8 + [5.0])
    assert one_outlier.cv > 0.05 and quality_flags(one_outlier, plan, budget, True) == []
    assert quality_flags(summarize([1.0, 1.2, 0.8, 1.3, 0.7]), plan, budget, True) == ["noisy"]
    assert quality_flags(summarize([0.5]), plan, budget, False) == ["one-sample"]
    # 10 iterations of 10 µs: 0.1 ms rounds
    short = summarize([1e-5] * 5)
    assert quality_flags(short, plan, budget, planned_here=True) == ["short-rounds"]


def test_noisy_means_the_figure_may_be_off_by_more_than_5_percent_not_that_its_rounds_spread():
    budget, plan = BuildTiming(min_round_s=1e-3), RoundPlan(0, 10, 9, 0.0)
    # rounds spread ~9% (IQR / median)
    spread = [1.0, 1.04, 0.96, 1.06, 0.94, 1.02, 0.98, 1.08]
    few, many = summarize(spread), summarize(spread * 8)
    assert few.rel_iqr == pytest.approx(many.rel_iqr, rel=0.2) and few.rel_iqr > 0.05
    # 8 rounds: the median is known to about ±6%; 64 rounds of the same spread: to about ±2%
    assert few.rel_ci95 > 0.05 > many.rel_ci95
    assert (
        quality_flags(few, plan, budget, True) == ["noisy"]
        and quality_flags(many, plan, budget, True) == []
    )


def test_impossible_figures_are_said():
    assert past_bounds({"tflops": 500.0}, "NVIDIA H100 80GB HBM3", "bf16") == []
    impossible = past_bounds({"tflops": 2000.0}, "NVIDIA H100 80GB HBM3", "bf16")
    assert len(impossible) == 1 and "above the bf16 datasheet peak" in impossible[0]
    # unknown peak: no claim
    assert past_bounds({"tflops": 2000.0}, "AMD EPYC", "bf16") == []
    # a cache figure may be
    assert (
        past_bounds({"gbps": 9000.0, "memory_tier": "cache"}, "NVIDIA H100 80GB HBM3", "fp32") == []
    )


@pytest.mark.parametrize(
    "figures, says",
    [
        (
            {"scaling_efficiency": 3.03},
            "impossible: scaling efficiency 3.03 > 1.05 — another job shared the machine",
        ),
        # a busy reference
        ({"mfu": 1.4, "measured_peak_tflops": 0.1}, "impossible: MFU 140% is above the whole peak"),
        (
            {"gbps": 9000.0, "memory_tier": "dram"},
            "impossible: 9000 GB/s is above the memory datasheet peak 3350 GB/s",
        ),
    ],
)
def test_a_figure_past_its_bound_flags_its_row_which_keeps_its_samples(
    ctx, tmp_path, figures, says
):
    build = lambda case, bctx: fixed(lambda: None, lambda s, r: dict(figures))  # noqa: E731
    row = run(MatmulCase("fp32", 64), build, FakeBenchmark([0.001, 0.002, 0.003]), ctx)
    assert (
        row["status"] == "ok" and "impossible" in row["flags"].split(";") and says in row["reason"]
    )
    assert read_rows(tmp_path / "run.csv")[0]["samples_s"] == [0.001, 0.002, 0.003]
    fine = run(
        MatmulCase("fp32", 64),
        lambda c, x: fixed(lambda: None, lambda s, r: {"scaling_efficiency": 0.9}),
        FakeBenchmark(),
        ctx,
    )
    assert "impossible" not in fine["flags"] and "impossible" not in fine["reason"]


def test_a_diverged_run_is_a_failed_row_that_is_not_raised(ctx, tmp_path):
    def build(case, bctx):
        def figures(stats, result):
            raise Diverged("train_loss is nan")

        return fixed(lambda: None, figures)

    row = run(MatmulCase("fp32", 64), build, FakeBenchmark(), ctx)
    assert (row["status"], row["reason"]) == ("failed", "diverged: train_loss is nan")


def test_the_peak_window_starts_after_the_build(ctx, monkeypatch):
    events = []
    monkeypatch.setattr(devices, "reset_peak_memory", lambda device: events.append("reset"))

    def build(case, bctx):
        events.append("build")
        return fixed(lambda: events.append("call"))

    run(MatmulCase("fp32", 64), build, FakeBenchmark(), ctx)
    assert events[:3] == ["build", "reset", "call"]


def test_cpu_memory_is_the_allocators_peak_of_the_case(ctx):
    big = lambda: torch.ones(2**22).sum()  # noqa: E731 - 16 MiB allocated, then freed
    row = run(
        MatmulCase("fp32", 64),
        lambda c, x: Timed(fn=big, plan=RoundPlan(0, 1, 3, 0.0), cpu_memory=big),
        FakeBenchmark(),
        ctx,
    )
    assert row["mem_source"] == "cpu-profiler" and 2**24 <= row["peak_mem_bytes"] < 2**25


def test_summary_line_names_the_headline_figures():
    line = summary_line(
        {
            "workload": "mnist_epoch",
            "case_id": "mnist_epoch/guide-template",
            "status": "ok",
            "median_s": 17.8,
            "rounds": 1,
            "epoch_s": 17.8,
            "samples_per_s": 3722.0,
            "test_accuracy": 0.86,
            "input_bound": False,
            "flags": "one-sample",
        }
    )
    assert line == (
        "mnist_epoch/guide-template: median 17.8 s over 1 sample(s) [one-sample]; epoch 17.8 s, "
        "3722 samples/s, accuracy 0.860"
    )
    assert (
        summary_line({"case_id": "c", "status": "skipped", "reason": "why"}) == "c: skipped — why"
    )


def test_summary_line_says_how_busy_the_machine_was_and_ends_without_an_empty_part():
    line = summary_line(
        {
            "workload": "mine",
            "case_id": "mine/step",
            "status": "ok",
            "median_s": 0.00208,
            "rounds": 10,
            "flags": "noisy;busy",
            "cpu_busy_frac": 0.62,
        }
    )
    assert line == "mine/step: median 2.08 ms over 10 sample(s) [noisy, busy 62%]"


def test_a_users_own_line_names_the_rate_its_work_gives():
    """gpubench.measure(..., work={"samples": 64}) declares no headlines: the rate its work gives is
    its figure."""
    line = summary_line(
        {
            "workload": "mine",
            "case_id": "mine/step",
            "status": "ok",
            "median_s": 0.00208,
            "rounds": 10,
            "samples_per_s": 30769.2,
            "flags": "",
        }
    )
    assert line == "mine/step: median 2.08 ms over 10 sample(s); 3.077e+04 samples/s"


@pytest.mark.parametrize("busy, status", [(0.5, "ok"), (0.0, "failed")])
def test_a_selfcheck_that_disagrees_on_a_busy_machine_is_inconclusive_not_failed(
    ctx, monkeypatch, busy, status
):
    """Load makes the clocks disagree (a 1.031 ratio at cpu_busy_frac 0.5 failed an A/A run): the
    selfcheck measures again, then says the machine was busy; it fails only on a quiet machine."""
    attempts = []
    monkeypatch.setattr(
        selfcheck, "interleaved_ratios", lambda *args: attempts.append(1) or ([1.031] * 5, [])
    )
    monkeypatch.setattr(selfcheck.LoadMeter, "busy_frac", lambda self: busy)
    case = selfcheck.SelfcheckCase("fp32", 64)
    if status == "failed":
        with pytest.raises(
            selfcheck.SelfcheckFailed, match=r"ratio 1.031 \(99% CI 1.031–1.031\) outside"
        ):
            run_with(case, selfcheck.WORKLOAD, FakeBenchmark(), ctx)
        # a quiet machine, a clear disagreement: no second measurement
        assert len(attempts) == 1
        return
    row = run_with(case, selfcheck.WORKLOAD, FakeBenchmark(), ctx)
    assert (
        row["status"] == "ok"
        and row["reason"].startswith("selfcheck inconclusive: machine busy")
        and "busy" in row["flags"].split(";")
    )
    # measured again while busy
    assert len(attempts) == selfcheck.ATTEMPTS


def test_a_selfcheck_just_outside_the_band_is_measured_again_and_pooled(ctx, monkeypatch):
    """An A/A run read 0.968 (band 0.97–1.03) and failed the README's main job on a quiet machine: a
    median outside the band whose interval reaches into it is noise until more pairs say
    otherwise."""
    sets = iter(
        [[0.90, 0.95, 0.96, 0.965, 0.968, 0.97, 1.02], [0.99, 1.0, 1.0, 1.01, 1.0, 0.99, 1.0]]
    )
    attempts = []
    monkeypatch.setattr(
        selfcheck, "interleaved_ratios", lambda *args: attempts.append(1) or (next(sets), [])
    )
    monkeypatch.setattr(selfcheck.LoadMeter, "busy_frac", lambda self: 0.0)
    row = run_with(selfcheck.SelfcheckCase("fp32", 64), selfcheck.WORKLOAD, FakeBenchmark(), ctx)
    # the calls per pair come from a timed matmul (load-dependent): the pooled pairs are what this
    # test guards
    assert (
        row["status"] == "ok"
        and len(attempts) == 2
        and row["reason"].startswith("14 interleaved pairs of ")
    )
    assert 0.97 <= row["selfcheck_tub_ratio"] <= 1.03


def test_a_selfcheck_that_stays_unclear_on_a_quiet_machine_is_inconclusive_noisy(ctx, monkeypatch):
    attempts = []
    # median 0.965, its interval 0.90–1.02 reaches into the band
    wide = [0.90, 0.95, 0.96, 0.965, 0.968, 0.97, 1.02]
    monkeypatch.setattr(
        selfcheck, "interleaved_ratios", lambda *args: attempts.append(1) or (wide, [])
    )
    monkeypatch.setattr(selfcheck.LoadMeter, "busy_frac", lambda self: 0.0)
    row = run_with(selfcheck.SelfcheckCase("fp32", 64), selfcheck.WORKLOAD, FakeBenchmark(), ctx)
    assert (
        row["status"] == "ok"
        and len(attempts) == selfcheck.ATTEMPTS
        and "noisy" in row["flags"].split(";")
    )
    assert row["reason"].startswith(
        "selfcheck inconclusive: too noisy to tell — harness/torch.utils.benchmark median "
        "ratio 0.965 (99% CI"
    )
    assert "21 interleaved pairs" in row["reason"]


@pytest.mark.parametrize(
    "case, allowed",
    [
        (MatmulCase("fp32", 64), False),
        (MatmulCase("tf32", 64), True),
        (EpochCase(precision="fp32"), False),
        (EpochCase(precision="bf16"), False),
    ],
)
def test_cudnn_tf32_is_set_for_the_timed_region_recorded_and_restored(ctx, tmp_path, case, allowed):
    """torch's default is cuDNN TF32 on: an fp32 case (dtype or training precision) runs its
    convolutions in IEEE fp32, a tf32 case in TF32; the row says which; the process gets its value
    back."""
    # the opposite, so a case that sets nothing is caught
    torch.backends.cudnn.allow_tf32 = not allowed
    seen = []

    def build(case, bctx):
        return fixed(lambda: seen.append(torch.backends.cudnn.allow_tf32))

    try:
        row = run(case, build, FakeBenchmark([0.001]), ctx)
        assert (
            row["status"] == "ok"
            and seen
            and set(seen) == {allowed}
            and row["cudnn_tf32"] is allowed
        )
        assert torch.backends.cudnn.allow_tf32 is (not allowed)
        assert read_rows(tmp_path / "run.csv")[0]["cudnn_tf32"] is allowed
    finally:
        torch.backends.cudnn.allow_tf32 = True
