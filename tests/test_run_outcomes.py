"""The exit status of `gpubench run` tells what the run made, not only whether a case failed: a run
that measured nothing (every case out of memory or skipped, over budget say) and a run whose report
could not be written do not exit 0; each says so in one line, the rows kept."""

from __future__ import annotations

import argparse
import errno
from pathlib import Path

import pytest

from gpubench.harness.commands.common import report_after_run
from gpubench.harness.commands.run_command import after_builds
from gpubench.harness.core.exits import ExitCode
from gpubench.harness.processes.cpu_readings import CpuWatch
from gpubench.harness.records.results import ResultsWriter
from gpubench.harness.records.schema import SCHEMA_VERSION

EXAMPLE = Path(__file__).resolve().parent.parent / "reports" / "examples" / "cpu-2core-quick.csv"


def run_of(folder: Path, statuses: list[str]) -> Path:
    """A run's CSV holding one row per status."""
    writer = ResultsWriter(folder, "r1")
    for k, status in enumerate(statuses):
        reason = {"oom": "CUDA out of memory", "skipped": "over budget: its share is 2 s"}.get(
            status, ""
        )
        writer.append(
            {
                "schema_version": SCHEMA_VERSION,
                "run_id": "r1",
                "timestamp_utc": "2026-11-02T10:00:00+00:00",
                "machine_id": "m",
                "hostname": "h",
                "device": "cpu",
                "device_name": "x",
                "torch_version": "2",
                "cuda_version": "",
                "workload": "matmul",
                "case_id": f"matmul/fp32-n{64 * (k + 1)}",
                "status": status,
                "reason": reason,
                "build": 0,
                "builds": 1,
            }
        )
    writer.close()
    return folder / "r1.csv"


@pytest.mark.parametrize(
    "statuses",
    [["oom", "oom"], ["skipped", "oom"], ["skipped"]],
    ids=["all-oom", "oom-and-over-budget", "all-over-budget"],
)
def test_a_run_that_measured_nothing_does_not_exit_0(tmp_path, capsys, statuses):
    csv_path = run_of(tmp_path, statuses)
    args = argparse.Namespace(rows_written=len(statuses), no_report=True)
    assert after_builds(args, ExitCode.OK, csv_path, CpuWatch()) == ExitCode.NOTHING_MEASURED
    [line] = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert line.startswith("gpubench: error: nothing was measured") and "raise --budget" in line


@pytest.mark.parametrize(
    "statuses", [["ok", "oom"], ["unreached", "skipped"]], ids=["one-ok", "one-unreached"]
)
def test_a_run_that_measured_one_case_exits_0(tmp_path, capsys, statuses):
    args = argparse.Namespace(rows_written=len(statuses), no_report=True)
    assert after_builds(args, ExitCode.OK, run_of(tmp_path, statuses), CpuWatch()) == ExitCode.OK
    assert "nothing was measured" not in capsys.readouterr().err


def test_a_failed_case_keeps_its_own_exit(tmp_path):
    args = argparse.Namespace(rows_written=1, no_report=True)
    assert (
        after_builds(args, ExitCode.FAILED, run_of(tmp_path, ["oom"]), CpuWatch())
        == ExitCode.FAILED
    )


@pytest.mark.usefixtures("unrendered_plots")
def test_a_report_that_cannot_be_written_does_not_exit_0(tmp_path, capsys, monkeypatch):
    (tmp_path / "afile").write_text("", encoding="utf-8")
    assert (
        report_after_run([EXAMPLE], tmp_path / "afile" / "report", ExitCode.OK)
        == ExitCode.REPORT_NOT_WRITTEN
    )
    assert "report not written" in capsys.readouterr().err

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("gpubench.reports.render.build.replace_bytes", full)
    assert report_after_run([EXAMPLE], tmp_path / "out", ExitCode.OK) == ExitCode.REPORT_NOT_WRITTEN
    [line] = [line for line in capsys.readouterr().err.splitlines() if "report not written" in line]
    assert "No space left on device" in line and "gpubench report" in line
    # the graver
    assert report_after_run([EXAMPLE], tmp_path / "afile" / "r", ExitCode.FAILED) == ExitCode.FAILED
