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
from dataclasses import dataclass
from typing import ClassVar

import torch

from harness.cases import Case, CaseSkipped
from harness.runner import Timed


@dataclass(frozen=True)
class TinyCase(Case):
    workload: ClassVar[str] = "matmul"
    dtype: str
    size: int


def gpubench_cases(profile, device):
    return [TinyCase("fp32", 32), TinyCase("tf32", 32)]


def build(case, device, profile):
    if case.dtype == "tf32":
        raise CaseSkipped("tf32 needs CUDA")
    a = torch.randn(case.size, case.size)
    return Timed(fn=lambda: a @ a, figures=lambda s, r: {"tflops": 2 * case.size**3 / s.median_s / 1e12})


def test_tiny(case, gpubench):
    gpubench.run(case, build)
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
    result.assert_outcomes(passed=1, skipped=1)
    rows = rows_in(tiny.path / "out")
    assert set(REQUIRED_COLUMNS) <= set(rows[0])
    ok, skipped = sorted(rows, key=lambda r: r["status"])
    assert ok["status"] == "ok" and float(ok["median_s"]) > 0 and float(ok["tflops"]) > 0
    assert len(json.loads(ok["samples_s"])) == int(ok["rounds"])
    assert (skipped["status"], skipped["reason"]) == ("skipped", "tf32 needs CUDA")
    assert ok["machine_id"] and ok["torch_version"] and ok["device"] == "cpu"
    # pytest-benchmark's own JSON still works, timed with the synced clock, figures in extra_info
    data = json.loads((tiny.path / "bench.json").read_text())
    assert data["benchmarks"][0]["options"]["timer"].endswith("synced_clock")
    assert data["benchmarks"][0]["extra_info"]["case_id"] == "matmul/dtype=fp32-size=32"
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
    result.assert_outcomes(passed=1, skipped=1)
    assert not list((tiny.path / "out").glob("*.csv")) if (tiny.path / "out").exists() else True


def test_real_micro_benches_end_to_end(tmp_path):
    """The shipped bench modules at the smoke profile: every case yields a row."""
    done = subprocess.run([sys.executable, "-m", "pytest", "benches", "--benchmark-only", "--profile=smoke", "-q",
                           "-k", "matmul or speedup or elementwise or selfcheck or transfer or inference", f"--results-dir={tmp_path}"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = rows_in(tmp_path)
    workloads = {r["workload"] for r in rows}
    assert workloads == {"matmul", "matmul_speedup", "elementwise", "selfcheck", "transfer", "inference"}
    assert all(r["status"] in ("ok", "skipped") for r in rows)
    selfcheck = next(r for r in rows if r["workload"] == "selfcheck")
    assert 0.5 < float(selfcheck["selfcheck_tub_ratio"]) < 2.0


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


def gpubench_cases(profile, device):
    return [FlagCase("tf32"), FlagCase("fp32")]


def build(case, device, profile):
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if case.dtype == "tf32" else "highest")
    return Timed(fn=lambda: None, cleanup=lambda: torch.set_float32_matmul_precision(previous))


def test_flag(case, gpubench):
    gpubench.run(case, build)
    assert torch.get_float32_matmul_precision() == "highest"
''')
    result = pytester.runpytest_subprocess("-p", "harness.plugin", "-p", "no:cacheprovider", "bench_flag.py", "--benchmark-disable")
    result.assert_outcomes(passed=2)
