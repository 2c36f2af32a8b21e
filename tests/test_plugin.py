"""The pytest plugin end to end, in fresh pytest processes (pytester)."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.schema import REQUIRED_COLUMNS

pytest_plugins = ["pytester"]
REPO = Path(__file__).resolve().parent.parent

TINY_BENCH = '''
import sys
from dataclasses import dataclass
from typing import ClassVar

import torch

from harness.cases import Case, CaseSkipped
from harness.runner import Timed

gpubench_workload = sys.modules[__name__]  # a bench module may hold its own workload
BUILDS = {"smoke": 2, "quick": 2, "full": 2}


@dataclass(frozen=True)
class TinyCase(Case):
    workload: ClassVar[str] = "matmul"
    dtype: str
    size: int


def cases(ctx):
    return [TinyCase("fp32", 32), TinyCase("tf32", 32)]


def build(case, ctx):
    if case.dtype == "tf32":
        raise CaseSkipped("tf32 needs CUDA")
    a = torch.randn(case.size, case.size)
    return Timed(fn=lambda: a @ a, figures=lambda s, r: {"tflops": 2 * case.size**3 / s.median_s / 1e12})


def test_tiny(case, gpubench):
    gpubench.run(case)
'''


@pytest.fixture
def tiny(pytester):
    pytester.makepyfile(bench_tiny=TINY_BENCH)
    return pytester


def run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "harness.plugin", "-p", "no:cacheprovider", "bench_tiny.py", *args)


def rows_in(folder: Path) -> list[dict]:
    files = list(folder.glob("*.csv"))
    assert len(files) == 1, files
    with open(files[0], newline="") as handle:
        return list(csv.DictReader(handle))


def test_a_tiny_bench_produces_rows_with_every_column(tiny):
    result = run(tiny, "--benchmark-only", "--device=cpu", "--profile=smoke", "--results-dir=out", "--benchmark-json=bench.json")
    result.assert_outcomes(passed=2, skipped=2)  # two builds each; the skipped case's second build writes no row
    rows = rows_in(tiny.path / "out")
    assert set(REQUIRED_COLUMNS) <= set(rows[0])
    ok = [r for r in rows if r["status"] == "ok"]
    (skipped,) = [r for r in rows if r["status"] == "skipped"]
    assert [r["build"] for r in ok] == ["0", "1"] and all(r["builds"] == "2" for r in ok)
    # builds are interleaved: both cases' build 0 before any build 1
    assert [(r["case_id"], r["build"]) for r in rows] == [("matmul/fp32-n32", "0"), ("matmul/tf32-n32", "0"), ("matmul/fp32-n32", "1")]
    first = ok[0]
    assert float(first["median_s"]) > 0 and float(first["tflops"]) > 0
    assert len(json.loads(first["samples_s"])) == int(first["rounds"])
    assert (skipped["status"], skipped["reason"]) == ("skipped", "tf32 needs CUDA")
    assert first["machine_id"] and first["torch_version"] and first["device"] == "cpu"
    # pytest-benchmark's own JSON still works, timed with the synced clock, figures in extra_info,
    # and its statistics are the CSV's: the same samples, the same quartiles
    data = json.loads((tiny.path / "bench.json").read_text())
    bench = data["benchmarks"][0]
    assert bench["options"]["timer"].endswith("synced_clock")
    assert bench["extra_info"]["case_id"] == "matmul/fp32-n32"
    assert bench["stats"]["iqr"] == pytest.approx(float(first["iqr_s"])) and bench["stats"]["median"] == pytest.approx(float(first["median_s"]))
    assert list((tiny.path / "out").glob("*.env.json"))


def test_save_and_compare_keep_working(tiny):
    first = run(tiny, "--benchmark-only", "--profile=smoke", "--results-dir=out", "--benchmark-storage=store", "--benchmark-save=base")
    assert first.ret == 0
    second = run(tiny, "--benchmark-only", "--profile=smoke", "--results-dir=out", "--benchmark-storage=store", "--benchmark-compare=0001")
    assert second.ret == 0
    assert len(list((tiny.path / "out").glob("*.csv"))) == 2  # one file per run


@pytest.mark.parametrize("args, message", [
    (["--device=quantum"], "unknown device 'quantum'"),
    (["--device=cuda:7"], "cuda"),
    (["--profile=huge"], "unknown profile 'huge'"),
    (["--dataset=imagenet"], "unknown dataset 'imagenet'"),
])
def test_bad_options_stop_before_any_case_with_one_line(tiny, args, message):
    result = run(tiny, "--benchmark-only", "--results-dir=out", *args)
    assert result.ret == 4
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1 and message in errors[0]
    assert "Traceback" not in result.stderr.str()
    assert not (tiny.path / "out").exists()


def test_unwritable_results_dir_is_a_usage_error(tiny):
    (tiny.path / "blocker").write_text("")
    result = run(tiny, "--benchmark-only", "--results-dir=blocker/sub")
    assert result.ret == 4
    assert "--results-dir" in result.stderr.str() and "Traceback" not in result.stderr.str()


def test_benchmark_disable_runs_once_and_records_nothing(tiny):
    result = run(tiny, "--benchmark-disable", "--results-dir=out")
    result.assert_outcomes(passed=1, skipped=1)  # one build each: an untimed run is a smoke test
    assert not list((tiny.path / "out").glob("*.csv")) if (tiny.path / "out").exists() else True
    summary = [line for line in result.outlines if "--benchmark-disable" in line]
    assert len(summary) == 1 and "nothing was recorded" in summary[0]  # said once, not per case
    assert "was not used at all" not in result.stdout.str()  # nor pytest-benchmark's warning per case


def test_real_micro_benches_end_to_end(tmp_path):
    """The shipped bench modules at the smoke profile: every case yields a row."""
    done = subprocess.run([sys.executable, "-m", "pytest", "benches", "--benchmark-only", "--profile=smoke", "-q",
                           "-k", "matmul or speedup or elementwise or transfer or inference", f"--results-dir={tmp_path}"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = rows_in(tmp_path)
    workloads = {r["workload"] for r in rows}
    assert workloads == {"matmul", "matmul_speedup", "elementwise", "transfer", "inference"}
    assert all(r["status"] in ("ok", "skipped") for r in rows)


def test_benchmark_disable_restores_global_flags(pytester):
    """--benchmark-disable still runs each case once; its cleanup must still run."""
    pytester.makepyfile(bench_flag='''
from dataclasses import dataclass
from typing import ClassVar

import torch

from harness.cases import Case
from harness.runner import Timed


@dataclass(frozen=True)
class FlagCase(Case):
    workload: ClassVar[str] = "matmul"
    dtype: str


import sys

gpubench_workload = sys.modules[__name__]


def cases(ctx):
    return [FlagCase("tf32"), FlagCase("fp32")]


def build(case, ctx):
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if case.dtype == "tf32" else "highest")
    return Timed(fn=lambda: None, cleanup=lambda: torch.set_float32_matmul_precision(previous))


def test_flag(case, gpubench):
    gpubench.run(case)
    assert torch.get_float32_matmul_precision() == "highest"
''')
    result = pytester.runpytest_subprocess("-p", "harness.plugin", "-p", "no:cacheprovider", "bench_flag.py", "--benchmark-disable")
    result.assert_outcomes(passed=2)


def test_a_biased_clock_fails_the_selfcheck(tiny):
    """The selfcheck's harness side is the clock pytest-benchmark uses: a --benchmark-timer that
    runs 25% slow must fail the row (band ±3%), with the ratio in its reason. (An 8% bias failed it
    too, but the smoke profile's 11 short pairs on a loaded 2-core machine once read it inside the band.)"""
    tiny.makepyfile(slow_clock="import time\ndef slow():\n    return time.perf_counter() * 1.25\n")
    tiny.makepyfile(bench_check="from harness.workloads import selfcheck as gpubench_workload\n\n\ndef test_selfcheck(case, gpubench):\n    gpubench.run(case)\n")
    result = tiny.runpytest_subprocess("-p", "harness.plugin", "-p", "no:cacheprovider", "bench_check.py", "--benchmark-only",
                                       "--profile=smoke", "--results-dir=out", "--benchmark-timer=slow_clock.slow")
    result.assert_outcomes(failed=1)
    (row,) = rows_in(tiny.path / "out")
    assert row["status"] == "failed" and "harness/torch.utils.benchmark median ratio" in row["reason"]
    # the smoke profile's 11 short pairs read the 25% bias with some noise: far above the band
    assert 1.1 < float(row["reason"].split("ratio ")[1].split()[0]) < 1.5


def test_a_later_build_process_appends_to_the_runs_file(tiny):
    """gpubench run starts one process per build: build 1 appends to build 0's CSV, and a case
    whose first build was skipped writes no second skipped row."""
    first = run(tiny, "--benchmark-only", "--results-dir=out", "--run-id=r", "--gpubench-build=0")
    first.assert_outcomes(passed=1, skipped=1, deselected=2)
    second = run(tiny, "--benchmark-only", "--results-dir=out", "--run-id=r", "--gpubench-build=1")
    second.assert_outcomes(passed=1, skipped=1, deselected=2)
    rows = rows_in(tiny.path / "out")
    assert [(r["case_id"], r["build"], r["status"]) for r in rows] == [
        ("matmul/fp32-n32", "0", "ok"), ("matmul/tf32-n32", "0", "skipped"), ("matmul/fp32-n32", "1", "ok")]
    assert run(tiny, "--benchmark-only", "--results-dir=out", "--run-id=r", "--gpubench-build=2").ret == 5  # no build 2: done


def test_options_coexist_with_a_plugin_that_owns_the_short_name(tiny):
    """pytest-profiling registers --profile: gpubench keeps --gpubench-profile and leaves --profile alone."""
    tiny.makepyfile(other_plugin="def pytest_addoption(parser):\n    parser.getgroup('profiling').addoption('--profile', action='store_true', help='another plugin')\n")
    result = tiny.runpytest_subprocess("-p", "other_plugin", "-p", "harness.plugin", "-p", "no:cacheprovider", "bench_tiny.py",
                                       "--benchmark-only", "--gpubench-profile=smoke", "--results-dir=out", "--profile")
    result.assert_outcomes(passed=2, skipped=2)  # the tiny bench has 2 builds in every profile
    assert {r["profile"] for r in rows_in(tiny.path / "out")} == {"smoke"}


def test_benchmark_json_carries_settings_and_the_device(tiny):
    result = run(tiny, "--benchmark-only", "--profile=smoke", "--results-dir=out", "--benchmark-json=bench.json")
    assert result.ret == 0
    data = json.loads((tiny.path / "bench.json").read_text())
    bench = data["benchmarks"][0]
    assert bench["params"]["case"] == {"workload": "matmul", "case_id": "matmul/fp32-n32", "dtype": "fp32", "size": 32}
    assert bench["extra_info"]["dtype"] == "fp32" and bench["extra_info"]["build"] == 0
    assert data["machine_info"]["gpubench"]["device"] == "cpu" and len(data["machine_info"]["gpubench"]["machine_id"]) == 12


def test_markers_select_the_fast_subset(tmp_path):
    done = subprocess.run([sys.executable, "-m", "pytest", "benches", "--collect-only", "-q", "-m", "not slow", "--profile=quick", "--device=cpu"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:]
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    assert ids and not any("mnist_epoch" in i or "test_ddp" in i for i in ids)
    assert any("test_matmul" in i for i in ids)


def test_the_build_count_is_the_selections_after_k(tiny, monkeypatch):
    """gpubench run starts as many build processes as the *selected* cases need: -k choosing a
    one-build workload must not start processes for another workload's builds."""
    tiny.makepyfile(bench_one=TINY_BENCH.replace('BUILDS = {"smoke": 2, "quick": 2, "full": 2}', 'BUILDS = {"smoke": 1, "quick": 1, "full": 1}')
                    .replace('workload: ClassVar[str] = "matmul"', 'workload: ClassVar[str] = "elementwise"').replace("def test_tiny", "def test_one"))
    count_file = tiny.path / "builds"
    monkeypatch.setenv("GPUBENCH_BUILD_COUNT_FILE", str(count_file))
    tiny.runpytest_subprocess("-p", "harness.plugin", "-p", "no:cacheprovider", "bench_tiny.py", "bench_one.py", "--collect-only", "-q")
    assert count_file.read_text() == "2"
    tiny.runpytest_subprocess("-p", "harness.plugin", "-p", "no:cacheprovider", "bench_tiny.py", "bench_one.py", "--collect-only", "-q", "-k", "test_one")
    assert count_file.read_text() == "1"
