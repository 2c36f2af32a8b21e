"""conv2d: the workload added through its own files only (catalogue, workload, bench, tests)."""

from __future__ import annotations

import csv
import subprocess
from pathlib import Path

import pytest
import torch

from gpubench.harness.catalog import spec_for
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.catalog.profiles import Profile
from gpubench.harness.records.schema import COLUMNS
from gpubench.harness.core.stats import summarize
from gpubench.harness.measurement.timing import SyncedClock
from gpubench.harness.workloads import conv2d

from runs import GPUBENCH

ROOT = Path(__file__).resolve().parent.parent


def ctx(device: str, profile: Profile = Profile.QUICK) -> BuildContext:
    return BuildContext(torch.device(device), profile, SyncedClock(torch.device("cpu")))


def test_cases_and_ids_per_device() -> None:
    cpu = [c.case_id for c in conv2d.cases(ctx("cpu"))]
    assert cpu == [
        "conv2d/fp32-nocl-bs16",
        "conv2d/fp32-cl-bs16",
        "conv2d/bf16-nocl-bs16",
        "conv2d/bf16-cl-bs16",
        "conv2d/fp16-nocl-bs16",
        "conv2d/fp16-cl-bs16",
    ]
    # only the device's type is read: no GPU needed
    cuda = [c.test_id for c in conv2d.cases(ctx("cuda"))]
    assert (
        len(cuda) == 12
        and "fp32-cl-cudnnbench-bs64" in cuda
        and "bf16-nocl-nocudnnbench-bs64" in cuda
    )
    assert all(c.batch_size == 4 for c in conv2d.cases(ctx("cpu", Profile.SMOKE)))


def test_declared_column_joins_the_schema_after_the_core() -> None:
    # the last core column
    assert COLUMNS.count("cudnn_benchmark") == 1 and COLUMNS.index(
        "cudnn_benchmark"
    ) > COLUMNS.index("samples_s")
    assert spec_for("conv2d").report.plot.y == "tflops"


def test_tflops_counts_two_operations_per_multiply_add() -> None:
    # 2 * N * C_out * H * W * C_in * 3 * 3 operations in one second
    assert conv2d.conv_tflops(2, 4, 8, 1.0) == 2 * 2 * 4 * 8 * 8 * 4 * 9 / 1e12


def test_build_runs_the_convolution_in_the_case_format() -> None:
    case = conv2d.ConvCase("fp32", True, None, 2)
    timed = conv2d.set_up(case, ctx("cpu"))
    out = timed.fn()
    assert out.shape == (2, 32, 32, 32) and out.dtype == torch.float32
    assert out.is_contiguous(memory_format=torch.channels_last)
    assert timed.figures(summarize([0.5]), out)["samples_per_s"] == 4.0


def test_cuda_flags_are_set_for_the_case_and_restored() -> None:
    before = torch.backends.cudnn.benchmark
    restore = conv2d.backend_flags(
        conv2d.ConvCase("fp32", False, not before, 64), torch.device("cuda")
    )
    assert torch.backends.cudnn.benchmark is (not before)
    restore()
    # cuDNN's TF32 is the runner's, for every workload (tests/test_runner.py)
    assert torch.backends.cudnn.benchmark is before


@pytest.mark.process
def test_a_run_writes_its_rows_and_its_report_section(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            *GPUBENCH,
            "run",
            "--device",
            "cpu",
            "--profile",
            "smoke",
            "-k",
            "conv2d",
            "--results-dir",
            str(tmp_path),
            "--run-id",
            "conv",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    with open(tmp_path / "conv.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert (
        len(rows) == 6
        and {r["status"] for r in rows} == {"ok"}
        and all(float(r["tflops"]) > 0 for r in rows)
    )
    report = (tmp_path / "conv-report" / "report.md").read_text(encoding="utf-8")
    assert "## Convolution (3x3, forward)" in report and "| fp16 | True |" in report
    assert (tmp_path / "conv-report" / "conv2d.png").stat().st_size > 0
