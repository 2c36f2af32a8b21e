"""One run, one answer: a headline figure comes from the builds the machine let run undisturbed
where a case has any, one made of busy builds alone says so, a ratio is printed only between
settings that ran alike, a memory with two modes is named as two groups by every run that saw both,
and the summary and the tables below it show the same number for the same thing (and the console
says what the summary leaves out)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_summary_bounds import CPU, ddp_rows, report_of, section_of

from gpubench.harness.records.results import ResultsWriter
from gpubench.reports.render.console import answer_lines

# These tests read the report's text, not its pixels (conftest.unrendered_plots).
pytestmark = pytest.mark.usefixtures("unrendered_plots")


def matmul(
    build: int, tflops: float, flags: str = "", dtype: str = "fp32", builds: int = 3
) -> dict:
    n = 1024
    return {
        "workload": "matmul",
        "case_id": f"matmul/{dtype}-n{n}",
        "dtype": dtype,
        "size": n,
        "build": build,
        "builds": builds,
        "tflops": tflops,
        "median_s": 2 * n**3 / tflops / 1e12,
        "samples_s": [0.01],
        "flags": flags,
        "cpu_busy_frac": 0.6 if "busy" in flags else 0.01,
    }


def test_a_busy_build_beside_quiet_ones_is_set_aside_and_the_summary_and_table_agree(tmp_path):
    # a quiet build's 0.182 TFLOP/s and a busy one's 0.070 read "0.126 ±45%" as one median
    text = report_of(tmp_path, [matmul(0, 0.182), matmul(1, 0.180), matmul(2, 0.070, "busy")])
    summary = section_of(text, "Summary")
    assert "| matmul fp32, best | 0.181 TFLOP/s (95% 0.167–0.196) |" in summary, summary
    assert (
        "1 busy build set aside: their cases have undisturbed builds" in text.split("## Summary")[0]
    )
    assert "0.181" in section_of(text, "Matmul")


def test_a_figure_of_busy_builds_only_says_so(tmp_path):
    text = report_of(
        tmp_path, [matmul(0, 0.07, "busy"), matmul(1, 0.071, "busy"), matmul(2, 0.069, "busy")]
    )
    assert (
        "| matmul fp32, best | 0.07 TFLOP/s (95% 0.0646–0.0758) (busy builds only) |"
        in section_of(text, "Summary")
    )


def dram(case: str, size: int, build: int, gbps: float) -> dict:
    return {
        "workload": "elementwise",
        "case_id": f"elementwise/{case}",
        "op": "add",
        "dtype": "fp32",
        "size": size,
        "build": build,
        "builds": 3,
        "gbps": gbps,
        "memory_tier": "dram",
        "median_s": 12 * size / gbps / 1e9,
        "samples_s": [0.01],
        "rounds": 20,
        "rel_iqr": 0.01,
    }


def test_a_memory_with_two_modes_is_named_as_two_groups_across_its_dram_sizes(tmp_path):
    """This VM's DRAM reads 26-31 or 49-51 GB/s; three builds of one size may see one mode, the
    sizes together see both: every run names the same two groups, and the elementwise table says
    what the summary says."""
    rows = [
        dram("add-fp32-2^25", 2**25, 0, 50.1),
        dram("add-fp32-2^25", 2**25, 1, 49.6),
        dram("add-fp32-2^25", 2**25, 2, 50.4),
        dram("add-fp32-2^26", 2**26, 0, 29.0),
        dram("add-fp32-2^26", 2**26, 1, 28.1),
        dram("add-fp32-2^26", 2**26, 2, 49.8),
    ]
    text = report_of(tmp_path, rows)
    cell = "50 GB/s, the faster builds; builds in two groups: 28.1–29 and 49.6–50.4 GB/s"
    assert f"| memory bandwidth (DRAM) | {cell} |" in section_of(text, "Summary")
    assert cell in section_of(text, "Elementwise")


def tta(design: str, seed: int, seconds: float, flags: str = "") -> dict:
    return {
        "workload": "time_to_accuracy",
        "case_id": f"time_to_accuracy/{design}-s{seed}",
        "design": design,
        "seed": seed,
        "target_accuracy": 0.85,
        "time_to_target_s": seconds,
        "epochs_to_target": 1.0,
        "test_accuracy": 0.86,
        "median_s": seconds,
        "samples_s": [seconds],
        "flags": flags,
        "dataset": "fashion-mnist",
    }


def test_a_ratio_of_a_quiet_setting_and_a_busy_one_is_not_printed(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    quiet = [tta("speedrun", s, 11.0) for s in range(3)] + [
        tta("template", s, 34.0) for s in range(3)
    ]
    line = next(
        row
        for row in section_of(report_of(tmp_path / "a", quiet), "Summary").splitlines()
        if "time to 0.85" in row
    )
    # three seeds of one time: no range
    assert "template 34 s (3.09x)" in line and "(seeds" not in line
    busy = [tta("speedrun", s, 11.0) for s in range(3)] + [
        tta("template", s, 60.0, "busy") for s in range(3)
    ]
    line = next(
        row
        for row in section_of(report_of(tmp_path / "b", busy), "Summary").splitlines()
        if "time to 0.85" in row
    )
    assert (
        "x)" not in line
        and "no ratio: the template ran beside other work, the other did not" in line
    )


def test_the_console_names_a_figure_the_summary_leaves_out(tmp_path):
    """Beside a spinner DDP's x2 read 2.63 efficiency, was flagged impossible, and vanished from the
    run's last lines without a word."""
    writer = ResultsWriter(tmp_path, "run")
    for row in ddp_rows(2.63, "noisy;impossible", "impossible: scaling efficiency 2.63 > 1.05"):
        writer.append(dict(CPU, **row))
    writer.close()
    lines = answer_lines([tmp_path / "run.csv"])
    assert any(
        "ddp/ddp-x2-gloo-bs128: left out — impossible: scaling efficiency 2.63" in line
        for line in lines
    )


def test_a_version_1_dram_row_is_dram_everywhere(tmp_path):
    from gpubench.harness.records.upgrade import upgrade_row

    old = {"workload": "elementwise", "size": str(2**28), "op": "add", "dtype": "fp32"}
    assert upgrade_row(dict(old), 1, "v1.csv")["memory_tier"] == "dram"
    assert upgrade_row(dict(old, size=str(2**20)), 1, "v1.csv")["memory_tier"] == "unknown"
    example = Path(__file__).resolve().parent.parent / "reports" / "examples" / "h200-quick.csv"
    from gpubench.reports.render.build import build_report

    text = build_report([example], tmp_path / "out", None).read_text(encoding="utf-8")
    assert "| memory bandwidth (DRAM) | 4343 GB/s (95% " in section_of(text, "Summary")
    assert "4343 GB/s" in section_of(text, "Elementwise")


def test_a_time_to_target_says_its_seeds_spread(tmp_path):
    rows = [tta("speedrun", s, t) for s, t in enumerate((10.9, 11.4, 17.5))]
    line = next(
        row
        for row in section_of(report_of(tmp_path, rows), "Summary").splitlines()
        if "time to 0.85" in row
    )
    assert "(seeds 10.9–17.5 s)" in line


def test_two_quiet_runs_each_read_within_the_interval_the_other_prints(tmp_path):
    """Two quiet runs back to back read fp32 matmul 0.161 ±3% and 0.173 ±4%: the builds' spread
    alone is no interval for another run. The summary's interval adds the noise between identical
    runs."""
    import re

    cells = {}
    for run, center in (("a", 0.161), ("b", 0.173)):
        (tmp_path / run).mkdir()
        text = report_of(
            tmp_path / run, [matmul(0, center * 0.99), matmul(1, center), matmul(2, center * 1.01)]
        )
        cells[run] = next(
            line for line in section_of(text, "Summary").splitlines() if "matmul fp32" in line
        )
    bounds = {
        run: tuple(map(float, re.search(r"\(95% ([\d.]+)–([\d.]+)\)", cell).groups()))
        for run, cell in cells.items()
    }
    assert (
        bounds["a"][0] <= 0.173 <= bounds["a"][1] and bounds["b"][0] <= 0.161 <= bounds["b"][1]
    ), cells


def test_a_case_built_once_per_run_gets_the_wider_interval():
    import pandas as pd

    from gpubench.reports.judge.intervals import run_interval

    several = run_interval(pd.Series([1.0, 1.0, 1.0]), pd.Series(["r", "r", "r"]))
    once = run_interval(pd.Series([1.0]), pd.Series(["r"]))
    assert several is not None and once is not None
    assert once[1] / once[0] > several[1] / several[0] > 1.15


def test_a_table_never_shows_a_figure_past_its_bound_bare(tmp_path):
    """The multi-process table read `scaling_efficiency 239.4%` with no flag while the summary
    called it impossible."""
    text = report_of(
        tmp_path, ddp_rows(2.394, "noisy;impossible", "impossible: scaling efficiency 2.39 > 1.05")
    )
    table = section_of(text, "Multi-process training")
    row = next(line for line in table.splitlines() if "| 2 |" in line)
    assert "impossible" in row


def dram_run(tmp_path: Path, run_id: str, builds_gbps: dict[str, list[float]]) -> Path:
    writer = ResultsWriter(tmp_path, run_id)
    for case, values in builds_gbps.items():
        size = 2**25 if case.endswith("2^25") else 2**26
        for build, gbps in enumerate(values):
            row = dram(case, size, build, gbps)
            median_s = row["median_s"]
            row.update(run_id=run_id, samples_s=[median_s * 0.99, median_s, median_s * 1.01] * 4)
            writer.append(dict(CPU, **row))
    writer.close()
    return tmp_path / f"{run_id}.csv"


def test_compare_calls_a_change_of_memory_mode_no_regression(tmp_path, capsys):
    """Of three quiet runs of unchanged code one pair exited 1: add-fp32-2^25 'slower' x1.38 at p =
    0.002, this VM's DRAM reading 26-31 GB/s in one run and 49-51 in the other."""
    from gpubench.harness.commands.cli import main

    base = dram_run(
        tmp_path, "base", {"add-fp32-2^25": [50.1, 49.6, 50.4], "add-fp32-2^26": [29.0, 28.1, 49.8]}
    )
    new = dram_run(
        tmp_path, "new", {"add-fp32-2^25": [29.3, 28.6, 30.1], "add-fp32-2^26": [28.8, 29.4, 49.9]}
    )
    code = main(["compare", str(base), str(new)])
    out = capsys.readouterr().out
    assert code == 6, out
    assert "cannot judge: two modes" in out and "memory reads in two modes" in out
