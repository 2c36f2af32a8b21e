"""A row built from its typed parts serialises to exactly the schema's columns and cells."""

import csv

import pytest

from gpubench.harness.core.stats import summarize
from gpubench.harness.records.results import ResultsWriter
from gpubench.harness.records.row import (
    CaseColumns,
    CaseResult,
    Load,
    MeasuredColumns,
    Memory,
    Row,
    Status,
    fingerprint_columns,
)
from gpubench.harness.records.schema import COLUMNS, SCHEMA_VERSION

ENV = {
    "machine_id": "m1",
    "hostname": "box",
    "device": "cpu",
    "device_name": "cpu",
    "torch_version": "2.0",
    "cuda_version": "",
    "not_a_run_column": "left out",
}
CASE = CaseColumns(
    "2026-01-02T03:04:05+00:00",
    "mnist_epoch",
    "mnist_epoch/guide",
    build=1,
    builds=3,
    settings={"batch_size": 64, "dataset": None, "precision": "fp32"},
    cudnn_tf32=False,
)


def measured_result(flags: tuple[str, ...] = ("noisy", "busy")) -> CaseResult:
    # samples whose statistics are exact in binary floating point
    measurement = MeasuredColumns(
        summarize([0.25, 0.25, 0.25]), iterations=4, samples_s=[0.25, 0.25, 0.25]
    )
    # the loaded dataset: a setting
    figures = {"samples_per_s": 256.0, "dataset": "fashion-mnist", "peak_mem_bytes": 1}
    return CaseResult(
        Status("ok", "a note", flags),
        measurement,
        first_call_s=2.5,
        figures=figures,
        memory=Memory(1024, "cpu-profiler", 512, None),
        energy={"energy_j": 3.0, "energy_source": "rapl"},
    )


def written_cells(tmp_path, row: Row) -> dict[str, str]:
    writer = ResultsWriter(tmp_path, "run")
    try:
        writer.append(row.columns())
    finally:
        writer.close()
    with open(tmp_path / "run.csv", newline="", encoding="utf-8") as file:
        reader = csv.DictReader(file)
        assert tuple(reader.fieldnames) == COLUMNS
        (cells,) = list(reader)
    return {column: text for column, text in cells.items() if text != ""}


def test_a_measured_row_serialises_to_exactly_its_columns(tmp_path):
    row = Row(
        fingerprint_columns(ENV, "run", "smoke"),
        CASE,
        measured_result(),
        Load(0.5, None, ("busy",)),
        build_s=4.0,
    )
    assert written_cells(tmp_path, row) == {
        "schema_version": str(SCHEMA_VERSION),
        "run_id": "run",
        "timestamp_utc": "2026-01-02T03:04:05+00:00",
        "profile": "smoke",
        "machine_id": "m1",
        "hostname": "box",
        "device": "cpu",
        "device_name": "cpu",
        "torch_version": "2.0",
        "workload": "mnist_epoch",
        "case_id": "mnist_epoch/guide",
        "build": "1",
        "builds": "3",
        "batch_size": "64",
        "dataset": "fashion-mnist",
        "precision": "fp32",
        "cudnn_tf32": "False",
        "rounds": "3",
        "iterations": "4",
        "median_s": "0.25",
        "iqr_s": "0.0",
        "min_s": "0.25",
        "mean_s": "0.25",
        "stddev_s": "0.0",
        "cv": "0.0",
        "rel_iqr": "0.0",
        "iqr_outliers": "0",
        "stddev_outliers": "0",
        "round_s": "1.0",
        "build_s": "4.0",
        "first_call_s": "2.5",
        "cpu_busy_frac": "0.5",
        "samples_per_s": "256.0",
        "peak_mem_bytes": "1024",
        "mem_source": "cpu-profiler",
        "mem_allocated_bytes": "512",
        "energy_j": "3.0",
        "energy_source": "rapl",
        "status": "ok",
        "reason": "a note",
        "flags": "noisy;busy",
        "samples_s": "[0.25, 0.25, 0.25]",
    }


def test_a_skipped_row_keeps_the_columns_its_error_carries_and_no_measurement():
    result = CaseResult(Status("skipped", "over budget"), figures={"first_call_s": 9.0})
    columns = Row(
        {"run_id": "run"}, CASE, result, Load(0.0, 2, ("busy-gpu",)), build_s=0.5
    ).columns()
    assert (
        columns["first_call_s"] == 9.0
        and columns["status"] == "skipped"
        and columns["flags"] == "busy-gpu"
    )
    assert (
        columns["gpu_other_procs"] == 2
        and "median_s" not in columns
        and "peak_mem_bytes" not in columns
    )


def test_a_column_the_schema_does_not_name_is_refused_with_the_fix():
    result = CaseResult(Status("ok", ""), figures={"furlongs_per_s": 1.0})
    with pytest.raises(ValueError, match=r"\['furlongs_per_s'\] — declare them in the schema"):
        Row({"run_id": "run"}, CASE, result, Load(0.0), build_s=0.5).columns()
