"""A report of two runs of one machine (`gpubench report before.csv after.csv`) says what `gpubench
compare before.csv after.csv` says: its "Before and after" section carries compare's verdicts and
intervals, and no History line shows a bare percentage compare calls inconclusive."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpubench.harness.records.results import ResultsWriter
from gpubench.harness.records.schema import SCHEMA_VERSION
from gpubench.reports.render.build import build_report
from gpubench.reports.render.compare import compare_paths

# These tests read the report's tables, not its pixels (conftest.unrendered_plots).
pytestmark = pytest.mark.usefixtures("unrendered_plots")

# Build medians (s) per case and run. fp32: builds scatter by 3x, its median halves (the headline
# reads 0.1952 -> 0.3862 TFLOP/s, +98%) and compare cannot tell; bf16 at n=1024 (its best size;
# n=512, unchanged, reaches a quarter of its TFLOP/s): tight builds, twice as slow; elementwise:
# unchanged.
BEFORE = {
    "matmul/bf16-n512": [0.0020, 0.00201, 0.00199],
    "matmul/fp32-n1024": [0.0110, 0.0062, 0.0190],
    "matmul/bf16-n1024": [0.0040, 0.00404, 0.00398],
    "elementwise/add-fp32-2^20": [1e-4, 1.01e-4, 0.99e-4],
    "elementwise/relu-fp32-2^20": [6e-5, 6.1e-5, 5.9e-5],
}
AFTER = {
    "matmul/bf16-n512": [0.00201, 0.0020, 0.00202],
    "matmul/fp32-n1024": [0.00556, 0.0098, 0.0031],
    "matmul/bf16-n1024": [0.0080, 0.00808, 0.00796],
    "elementwise/add-fp32-2^20": [1.005e-4, 1.0e-4, 0.995e-4],
    "elementwise/relu-fp32-2^20": [6e-5, 6e-5, 6.05e-5],
}


def case_row(run_id: str, day: str, case_id: str, build: int, median_s: float) -> dict:
    workload, setting = case_id.split("/")
    row = {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "timestamp_utc": f"{day}T12:00:00+00:00",
        "profile": "quick",
        "machine_id": "m",
        "hostname": "h",
        "device": "cpu",
        "device_name": "cpu",
        "cpu_model": "x",
        "cpu_cores": 2,
        "ram_bytes": 8 * 2**30,
        "torch_version": "2.9.0",
        "workload": workload,
        "case_id": case_id,
        "dtype": setting.split("-")[1 if workload == "elementwise" else 0],
        "build": build,
        "median_s": median_s,
        "samples_s": [median_s],
        "status": "ok",
    }
    if workload == "matmul":
        n = int(setting.split("-n")[1])
        row.update(size=n, tflops=2 * n**3 / median_s / 1e12)
    # two fp32 arrays of 2^20 read, one written
    else:
        row.update(size=2**20, gbps=3 * 4 * 2**20 / median_s / 1e9)
    return row


def write_run(folder: Path, run_id: str, day: str, cases: dict[str, list[float]]) -> Path:
    writer = ResultsWriter(folder, run_id)
    for case_id, medians in cases.items():
        for build, median_s in enumerate(medians):
            writer.append(case_row(run_id, day, case_id, build, median_s))
    writer.close()
    return folder / f"{run_id}.csv"


def compare_verdicts(base: Path, new: Path) -> dict[str, str]:
    """case -> the verdict cell `gpubench compare` prints."""
    text, _ = compare_paths(base, new, 0.05)
    return {
        cells[0]: cells[-1]
        for line in text.splitlines()
        if line.startswith("| ") and not line.startswith("| case")
        for cells in [[c.strip() for c in line.strip("|").split(" | ")]]
    }


def section(text: str, title: str) -> str:
    return text.split(f"## {title}\n")[1].split("\n## ")[0]


def table_rows(text: str) -> dict[str, list[str]]:
    """First cell -> the other cells, of every table row below the header."""
    rows = [
        [c.strip() for c in line.strip("|").split(" | ")]
        for line in text.splitlines()
        if line.startswith("| ")
    ]
    return {cells[0]: cells[1:] for cells in rows[1:]}


@pytest.fixture()
def two_runs(tmp_path) -> tuple[Path, Path, str]:
    before = write_run(tmp_path, "before", "2026-11-29", BEFORE)
    after = write_run(tmp_path, "after", "2026-12-01", AFTER)
    return (
        before,
        after,
        build_report([before, after], tmp_path / "report", None).read_text(encoding="utf-8"),
    )


def test_the_before_and_after_section_says_what_compare_says(two_runs):
    before, after, report = two_runs
    said = compare_verdicts(before, after)
    assert said["matmul/bf16-n1024"] == "slower" and said["matmul/fp32-n1024"].startswith(
        "inconclusive ("
    )
    part = section(report, "Before and after")
    assert (
        "run `before` → run `after`: 5 cases compared: 1 slower, 0 faster, 0 no change, 4 "
        "inconclusive" in part
    )
    rows = table_rows(part)
    # the unchanged cases are counted, not listed
    assert list(rows) == ["matmul/bf16-n1024", "matmul/fp32-n1024"]
    for case, cells in rows.items():
        # the same verdict, the same note
        assert cells[-1] == said[case], case
    slower = rows["matmul/bf16-n1024"]
    assert slower[:2] == ["4 ms", "8 ms"] and re.fullmatch(
        r"\+100% \(\+\d\d% to \+1\d\d%\)", slower[2]
    ), slower
    # its interval reaches both ways
    assert re.fullmatch(r"-49% \(-\d\d% to \+\d+%\)", rows["matmul/fp32-n1024"][2])


def test_no_history_percentage_contradicts_compare(two_runs):
    """The issue's report read `0.1954 → 0.3863 (+98%)` while compare called the change
    inconclusive."""
    _, _, report = two_runs
    (row,) = [
        line
        for line in section(report, "History").splitlines()
        if line.startswith("| h · cpu (cpu) |")
    ]
    fp32, bf16 = row.strip(" |").split(" | ")[4:6]
    # the scatter of its builds allows 10x either way
    interval = r"99% CI -\d\d% to (\+\d+%|over \+1000%)"
    assert re.fullmatch(rf"0\.1952 → 0\.3862 \(\+98%; inconclusive, {interval}\)", fp32), fp32
    # a throughput falls as its time rises: the slower case's interval, turned the figure's way
    assert re.fullmatch(r"0\.5369 → 0\.2684 \(-50%; slower, 99% CI -\d\d% to -\d\d%\)", bf16), bf16


def test_a_machine_with_three_runs_is_judged_on_its_last_two(tmp_path):
    """The section answers "what did the latest run change"; the History line judges its own first
    and last run."""
    paths = [
        write_run(tmp_path, "r1", "2026-11-01", BEFORE),
        write_run(tmp_path, "r2", "2026-11-02", BEFORE),
        write_run(tmp_path, "r3", "2026-11-03", AFTER),
    ]
    report = build_report(paths, tmp_path / "report", None).read_text(encoding="utf-8")
    part = section(report, "Before and after")
    assert "run `r2` → run `r3`: 5 cases compared: 1 slower" in part and "`r1`" not in part
    assert "-50%; slower, 99% CI" in section(report, "History")


def test_two_runs_of_unchanged_code_list_no_case(tmp_path):
    paths = [
        write_run(tmp_path, "a", "2026-11-01", BEFORE),
        write_run(tmp_path, "b", "2026-11-02", BEFORE),
    ]
    part = section(
        build_report(paths, tmp_path / "report", None).read_text(encoding="utf-8"),
        "Before and after",
    )
    assert (
        "5 cases compared: 0 slower, 0 faster, 0 no change, 5 inconclusive, 0 broken; none moved "
        "beyond 5%." in part
    )
    assert "| case |" not in part


def test_runs_of_two_machines_have_no_before_and_after(tmp_path):
    paths = [
        write_run(tmp_path, "a", "2026-11-01", BEFORE),
        write_run(tmp_path, "b", "2026-11-02", AFTER),
    ]
    paths[1].write_text(
        paths[1].read_text(encoding="utf-8").replace(",m,h,cpu,cpu,", ",m2,h2,cpu,cpu,"),
        # another host
        encoding="utf-8",
    )
    report = build_report(paths, tmp_path / "report", None).read_text(encoding="utf-8")
    assert "## Before and after" not in report
