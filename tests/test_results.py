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
    assert rows[0]["median_s"] == 0.125 and rows[0]["schema_version"] == SCHEMA_VERSION
    assert rows[0]["samples_s"] == [0.125, 0.25]
    assert rows[1]["reason"] == "tf32 is CUDA-only" and rows[1]["tflops"] is None


def test_schema_types_every_column_when_read(tmp_path):
    writer = ResultsWriter(tmp_path, "typed")
    writer.append(row("a", pinned=True, non_blocking=False, size=2**20, batch_size=None, gbps=12.5, input_bound=False, rounds=7))
    writer.close()
    (got,) = read_rows(tmp_path / "typed.csv")
    assert got["pinned"] is True and got["non_blocking"] is False and got["input_bound"] is False
    assert got["size"] == 2**20 and isinstance(got["size"], int) and got["rounds"] == 7
    assert got["gbps"] == 12.5 and got["batch_size"] is None


def test_units_and_groups_are_declared_once():
    from harness.schema import BY_NAME, human_column

    assert BY_NAME["median_s"].unit == "s" and BY_NAME["peak_mem_bytes"].unit == "bytes" and BY_NAME["tflops"].unit == "TFLOP/s"
    assert BY_NAME["pinned"].kind == "bool" and BY_NAME["case_id"].group == "case" and BY_NAME["hostname"].group == "run"
    assert human_column("median_s", 3.69e-05) == "36.9 µs"
    assert human_column("peak_mem_bytes", 1614901248) == "1.5 GiB"
    assert human_column("samples_per_s", 1.12e4) == "11.2 k samples/s"
    assert human_column("data_wait_frac", 0.67) == "67.0%"


def test_a_damaged_cell_is_refused_naming_file_and_line(tmp_path):
    path = tmp_path / "bad.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, restval="")
        writer.writeheader()
        writer.writerow({"schema_version": SCHEMA_VERSION, "run_id": "r", "workload": "matmul", "case_id": "a", "rounds": "seven", "status": "ok"})
    with pytest.raises(SchemaError, match=r"bad.csv: line 2: column rounds holds 'seven'"):
        read_rows(path)


def test_a_row_cut_inside_a_quoted_field_is_never_data(tmp_path):
    writer = ResultsWriter(tmp_path, "cut")
    writer.append(row("a", reason="one; two, three"))
    writer.close()
    text = (tmp_path / "cut.csv").read_text()
    (tmp_path / "cut.csv").write_text(text[: text.index("one; two") + 4])  # the reason's quotes never close
    with pytest.raises(SchemaError, match="line 2 is truncated"):
        read_rows(tmp_path / "cut.csv")


@pytest.mark.parametrize("name", ["tests/v1/cpu-2core-quick.csv", "reports/examples/h200-quick.csv"])
def test_version_1_example_files_are_upgraded_on_read(name):
    """Version-1 files as the first release wrote them (the CPU example of that release, the
    committed H200 example): read as v2, case ids rebuilt by the one id scheme, settings a case
    does not use emptied (a preloaded epoch has no DataLoader knobs)."""
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / name
    assert path.read_text().splitlines()[1].startswith("1,")  # really a version-1 file
    rows = read_rows(path)
    assert rows and all(r["schema_version"] == SCHEMA_VERSION and r["build"] == 0 and r["builds"] == 1 for r in rows)
    ids = {r["case_id"] for r in rows}
    assert "mnist_epoch/guide-template" in ids and "mnist_epoch/preloaded" in ids and "matmul/fp32-n1024" in ids
    preloaded = next(r for r in rows if r["case_id"] == "mnist_epoch/preloaded")
    assert preloaded["num_workers"] is None and preloaded["pin_memory"] is None and preloaded["loader"] == "preloaded"
    assert max(len(i) for i in ids) <= 60


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
            writer.append({{"schema_version": 2, "run_id": "killed", "case_id": f"case{{i}}", "status": "ok"}})
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
