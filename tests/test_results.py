"""The results CSV: the writer, the reader, the schema's types, and what a full disk, a killed
run or a damaged file leaves."""

import csv
import errno
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.results import (ResultsFull, ResultsWriter, RunIdError, check_run_id, check_writable, new_run_id, read_rows,
                             write_sidecar)
from harness.schema import BY_NAME, COLUMNS, REQUIRED_COLUMNS, SCHEMA_VERSION, SchemaError, human_column
from reports.load import ReportError, load_results

REPO = Path(__file__).resolve().parent.parent


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
    committed H200 example): read as the current version, case ids rebuilt by the one id scheme,
    settings a case does not use emptied (a preloaded epoch has no DataLoader knobs)."""
    path = REPO / name
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
            writer.append({{"schema_version": {SCHEMA_VERSION}, "run_id": "killed", "case_id": f"case{{i}}", "status": "ok"}})
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


# ---- a full results disk --------------------------------------------------------------------

def quoted_row(case_id: str, **extra):
    """A row whose reason needs CSV quoting."""
    return row(case_id, **{"reason": "a, quoted; reason", **extra})


def full_disk_after_half(monkeypatch) -> None:
    """Every os.write puts half its bytes on disk, then fails as a full disk does."""
    real_write = os.write

    def write(fd: int, data) -> int:
        real_write(fd, bytes(data[: max(1, len(data) // 2)]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", write)


@pytest.mark.parametrize("failing", ["write", "fsync"])
def test_a_full_disk_leaves_only_whole_rows_and_says_how_many(tmp_path, monkeypatch, failing):
    writer = ResultsWriter(tmp_path, "full")
    writer.append(quoted_row("a"))
    writer.append(quoted_row("b"))
    if failing == "write":
        full_disk_after_half(monkeypatch)
    else:  # the data reached the page cache; the disk refuses it at fsync (delayed allocation, NFS)
        monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space left on device")))
    with pytest.raises(ResultsFull) as caught:
        writer.append(quoted_row("c", reason="x" * 5000))
    monkeypatch.undo()
    message = str(caught.value)
    assert message.startswith(f"results folder full: 2 rows kept in {tmp_path / 'full.csv'}") and "\n" not in message
    assert "--results-dir" in message and caught.value.errno == errno.ENOSPC and isinstance(caught.value, OSError)
    assert [r["case_id"] for r in read_rows(tmp_path / "full.csv")] == ["a", "b"]  # no cut third row
    writer.append(quoted_row("d"))  # space freed: the run's file goes on whole
    writer.close()
    assert [r["case_id"] for r in read_rows(tmp_path / "full.csv")] == ["a", "b", "d"]


def test_a_later_build_process_counts_the_rows_already_in_the_file(tmp_path, monkeypatch):
    first = ResultsWriter(tmp_path, "run")
    first.append(quoted_row("a"))
    first.append(quoted_row("b"))
    first.close()
    later = ResultsWriter(tmp_path, "run", resume=True)
    full_disk_after_half(monkeypatch)
    with pytest.raises(ResultsFull, match="results folder full: 2 rows kept in"):
        later.append(quoted_row("c"))
    monkeypatch.undo()
    later.close()
    assert [r["case_id"] for r in read_rows(tmp_path / "run.csv")] == ["a", "b"]


def test_a_disk_full_before_the_header_leaves_no_file(tmp_path, monkeypatch):
    full_disk_after_half(monkeypatch)
    with pytest.raises(ResultsFull, match="results folder full: 0 rows kept"):
        ResultsWriter(tmp_path, "empty")
    monkeypatch.undo()
    assert not (tmp_path / "empty.csv").exists()


def test_a_sidecar_is_never_half_written(tmp_path, monkeypatch):
    writer = ResultsWriter(tmp_path, "run")
    writer.append(quoted_row("a"))
    write_sidecar(tmp_path, "run", "ops", {"case": [1, 2, 3]})
    full_disk_after_half(monkeypatch)
    with pytest.raises(ResultsFull, match=r"results folder full: 1 rows kept in .*run\.csv; run\.ops\.json not written"):
        write_sidecar(tmp_path, "run", "ops", {"case": list(range(10_000))})
    monkeypatch.undo()
    writer.close()
    assert (tmp_path / "run.ops.json").read_text() == '{\n  "case": [\n    1,\n    2,\n    3\n  ]\n}\n'  # the previous version, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.csv", "run.ops.json"]  # no temporary file left


# ---- run ids and damaged values -------------------------------------------------------------

@pytest.mark.parametrize("run_id", ["", "a\nb"])
def test_an_empty_or_control_character_run_id_is_refused(tmp_path, run_id):
    with pytest.raises(RunIdError, match="--run-id"):
        check_run_id(run_id, tmp_path)


def write_one_row(tmp_path: Path, **cells) -> Path:
    """A results file of one row written cell by cell (csv, not ResultsWriter, which refuses bad values)."""
    cells = dict({"schema_version": SCHEMA_VERSION, "run_id": "r", "workload": "matmul", "case_id": "matmul/fp32-n64", "status": "ok",
                  "median_s": "0.001", "samples_s": "[0.001, 0.001]"}, **cells)
    path = tmp_path / "damaged.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, restval="")
        writer.writeheader()
        writer.writerow(cells)
    return path


@pytest.mark.parametrize("cells", [{"median_s": "inf"}, {"median_s": "-1"}, {"samples_s": "[1,2,"}, {"samples_s": "hello"},
                                   {"samples_s": "[-1e-5]"}, {"status": "weird"}, {"case_id": ""}, {"size": "64.5"}, {"build": "-3"},
                                   {"timestamp_utc": "yesterday"}, {"timestamp_utc": "2026-13-45T99:00:00"}, {"run_id": ""}])
def test_damaged_values_are_refused_by_both_readers(tmp_path, cells):
    path = write_one_row(tmp_path, **cells)
    with pytest.raises(SchemaError, match="line 2: column"):
        read_rows(path)
    with pytest.raises(ReportError, match="line 2: column"):
        load_results([path])
