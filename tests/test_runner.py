import pytest
import torch

from fakes import FakeBenchmark
from harness.cases import CaseSkipped
from harness.results import ResultsWriter, read_rows
from harness.runner import RunContext, Timed, quality_warnings, run_case
from harness.stats import summarize
from harness.timing import Budget, RoundPlan
from harness.workloads.matmul import MatmulCase

CPU = torch.device("cpu")


@pytest.fixture
def ctx(tmp_path):
    writer = ResultsWriter(tmp_path, "run")
    yield RunContext(CPU, "smoke", Budget(target_s=0.01, min_rounds=3, max_rounds=3, warmup_calls=1),
                     {"schema_version": 1, "run_id": "run", "device_name": "NVIDIA H100 80GB HBM3"}, writer)
    writer.close()


def fixed(fn, figures=lambda s, r: {}):
    return Timed(fn=fn, figures=figures, plan=RoundPlan(1, 2, 3, 0.0))


def test_ok_row_carries_stats_figures_and_raw_samples(ctx, tmp_path):
    calls = []
    bench = FakeBenchmark([0.004, 0.001, 0.002])
    build = lambda case, device, profile: fixed(lambda: calls.append(1), lambda s, r: {"tflops": 1.5})  # noqa: E731
    row = run_case(MatmulCase("fp32", 64), build, bench, ctx)
    assert row["status"] == "ok"
    assert row["median_s"] == 0.002 and row["min_s"] == 0.001 and row["rounds"] == 3 and row["iterations"] == 2
    assert row["samples_s"] == [0.004, 0.001, 0.002]
    assert row["tflops"] == 1.5 and row["dtype"] == "fp32" and row["size"] == 64
    assert len(calls) == 1 + 3 * 2  # one warm-up call, then the rounds
    assert bench.extra_info["case_id"] == "matmul/dtype=fp32-size=64"
    assert read_rows(tmp_path / "run.csv")[0]["status"] == "ok"


def test_skipped_case_becomes_a_row(ctx, tmp_path):
    def build(case, device, profile):
        raise CaseSkipped("tf32 is a CUDA tensor-core mode; not available on cpu")

    row = run_case(MatmulCase("tf32", 64), build, FakeBenchmark(), ctx)
    assert (row["status"], row["reason"]) == ("skipped", "tf32 is a CUDA tensor-core mode; not available on cpu")
    assert read_rows(tmp_path / "run.csv")[0]["status"] == "skipped"


def test_out_of_memory_becomes_an_oom_row_and_the_run_goes_on(ctx):
    def build(case, device, profile):
        def explode():
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")
        return fixed(explode)

    row = run_case(MatmulCase("fp32", 65536), build, FakeBenchmark(), ctx)
    assert row["status"] == "oom" and "out of memory" in row["reason"]
    assert run_case(MatmulCase("fp32", 64), lambda c, d, p: fixed(lambda: None), FakeBenchmark(), ctx)["status"] == "ok"


def test_failure_is_recorded_then_raised(ctx, tmp_path):
    def build(case, device, profile):
        raise ValueError("bad\nthing")

    with pytest.raises(ValueError):
        run_case(MatmulCase("fp32", 64), build, FakeBenchmark(), ctx)
    row = read_rows(tmp_path / "run.csv")[0]
    assert row["status"] == "failed" and row["reason"] == "ValueError: bad thing"


def test_cleanup_runs_even_on_failure(ctx):
    restored = []
    timed = Timed(fn=lambda: 1 / 0, cleanup=lambda: restored.append(True), plan=RoundPlan(0, 1, 1, 0.0))
    with pytest.raises(ZeroDivisionError):
        run_case(MatmulCase("fp32", 64), lambda c, d, p: timed, FakeBenchmark(), ctx)
    assert restored == [True]


def test_negative_time_is_refused_as_impossible(ctx):
    row = None
    with pytest.raises(ValueError, match="impossible"):
        row = run_case(MatmulCase("fp32", 64), lambda c, d, p: fixed(lambda: None), FakeBenchmark([0.001, -0.002, 0.001]), ctx)
    assert row is None


def test_quality_warnings_flag_noise_and_impossible_figures():
    noisy = summarize([1.0, 1.5, 0.5])
    assert any("noisy" in w for w in quality_warnings(noisy, {}, "", "fp32"))
    steady = summarize([1.0, 1.0, 1.0])
    assert quality_warnings(steady, {"tflops": 500.0}, "NVIDIA H100 80GB HBM3", "bf16") == []
    impossible = quality_warnings(steady, {"tflops": 2000.0}, "NVIDIA H100 80GB HBM3", "bf16")
    assert len(impossible) == 1 and "above the bf16 datasheet peak" in impossible[0]
    assert quality_warnings(steady, {"tflops": 2000.0}, "AMD EPYC", "bf16") == []  # unknown peak: no claim


def test_summary_line_names_the_headline_figures():
    from harness.runner import summary_line

    line = summary_line({"case_id": "mnist_epoch/guide-template", "status": "ok", "median_s": 17.8, "rounds": 1,
                         "epoch_s": 17.8, "samples_per_s": 3722.0, "test_accuracy": 0.86, "input_bound": False})
    assert line == "mnist_epoch/guide-template: median 17.8 s over 1 round(s); epoch 17.8 s, 3722 samples/s, accuracy 0.860"
    assert summary_line({"case_id": "c", "status": "skipped", "reason": "why"}) == "c: skipped — why"
