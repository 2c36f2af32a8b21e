import csv
import subprocess
import sys
import textwrap

import pytest

from harness.results import ResultsWriter, check_writable, new_run_id, read_rows
from harness.schema import COLUMNS, REQUIRED_COLUMNS, SCHEMA_VERSION, SchemaError


def row(case_id: str, **extra):
    return dict({"schema_version": SCHEMA_VERSION, "run_id": "r", "workload": "matmul", "case_id": case_id,
                 "median_s": 0.125, "status": "ok", "samples_s": [0.125, 0.25]}, **extra)


def test_required_columns_are_in_the_schema():
    assert set(REQUIRED_COLUMNS) <= set(COLUMNS)


def test_round_trip(tmp_path):
    writer = ResultsWriter(tmp_path, "run1")
    writer.append(row("a"))
    writer.append(row("b", status="skipped", reason="tf32 is CUDA-only"))
    writer.close()
    rows = read_rows(tmp_path / "run1.csv")
    assert [r["case_id"] for r in rows] == ["a", "b"]
    assert float(rows[0]["median_s"]) == 0.125
    assert rows[0]["samples_s"] == "[0.125, 0.25]"
    assert rows[1]["reason"] == "tf32 is CUDA-only" and rows[1]["tflops"] == ""


def test_two_runs_never_share_a_file(tmp_path):
    ResultsWriter(tmp_path, "same").close()
    with pytest.raises(FileExistsError):
        ResultsWriter(tmp_path, "same")
    assert new_run_id() != new_run_id()


def test_killed_run_keeps_every_finished_case(tmp_path):
    script = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from harness.results import ResultsWriter
        writer = ResultsWriter(Path({str(tmp_path)!r}), "killed")
        for i in range(3):
            writer.append({{"schema_version": 1, "case_id": f"case{{i}}", "status": "ok"}})
        os.kill(os.getpid(), signal.SIGKILL)  # no close, no flush at exit
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert done.returncode != 0
    rows = read_rows(tmp_path / "killed.csv")
    assert [r["case_id"] for r in rows] == ["case0", "case1", "case2"]


def test_unknown_column_is_an_internal_error(tmp_path):
    writer = ResultsWriter(tmp_path, "x")
    with pytest.raises(AssertionError, match="not_a_column"):
        writer.append({"not_a_column": 1})


def test_newer_schema_is_refused_with_an_instruction(tmp_path):
    path = tmp_path / "new.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, restval="")
        writer.writeheader()
        writer.writerow({"schema_version": SCHEMA_VERSION + 1, "case_id": "a"})
    with pytest.raises(SchemaError, match="upgrade gpubench"):
        read_rows(path)


def test_not_a_results_file(tmp_path):
    path = tmp_path / "other.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(SchemaError, match="not a gpubench results file"):
        read_rows(path)


def test_unwritable_results_dir_names_the_fix(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OSError, match="--results-dir"):
        check_writable(blocker / "sub")
