"""A row whose median contradicts a throughput figure of its own (its tflops, GB/s, samples/s imply
another work per call than its settings, or its case's other rows, state) is no measurement: left
out of the figures and named."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from gpubench.reports.render.build import build_report
from gpubench.reports.judge.load import load_results
from gpubench.reports.judge.screen import contradicting

# These tests read the report's text, not its pixels (conftest.unrendered_plots).
pytestmark = pytest.mark.usefixtures("unrendered_plots")

EXAMPLES = Path(__file__).resolve().parent.parent / "reports" / "examples"
HEADLINE = EXAMPLES / "h200" / "headline.csv"


def test_a_median_a_hundred_times_off_its_own_tflops_is_refused_by_its_settings(tmp_path, capsys):
    rows = pd.read_csv(HEADLINE)
    at = rows.index[rows["case_id"].eq("matmul/bf16-n8192")][0]
    rows.loc[at, "median_s"] *= 0.01
    rows.to_csv(tmp_path / "run.csv", index=False)
    refused: list[str] = []
    frame = load_results([tmp_path / "run.csv"], refused, [])
    assert "matmul/bf16-n8192" not in set(frame["case_id"]) and len(frame) == len(rows) - 1
    [line] = refused
    assert line.startswith(f"{tmp_path / 'run.csv'}:{at + 2}: column median_s = ")
    assert "contradicts its own tflops" in line and "what its settings state" in line
    report = build_report([tmp_path / "run.csv"], tmp_path / "out", None).read_text(
        encoding="utf-8"
    )
    assert "contradicts its own tflops" in report and "contradicts" in capsys.readouterr().err


def test_a_build_whose_figure_and_median_disagree_with_its_cases_other_builds_is_refused(tmp_path):
    rows = pd.read_csv(HEADLINE)
    case = rows[rows["case_id"].eq("elementwise/add-fp32-2^24")]
    builds = pd.concat([case.assign(build=b, builds=3) for b in range(3)], ignore_index=True)
    builds.loc[2, "median_s"] *= 100
    builds.to_csv(tmp_path / "run.csv", index=False)
    refused: list[str] = []
    frame = load_results([tmp_path / "run.csv"], refused, [])
    assert sorted(frame["build"]) == [0, 1]
    [line] = refused
    assert "contradicts its own gbps" in line and "the other rows of its case in its run" in line


def test_rows_of_real_runs_never_contradict_themselves():
    files = [*EXAMPLES.glob("*.csv"), *(EXAMPLES / "h200").glob("*.csv")]
    frame = load_results(files, [], [])
    assert len(frame) > 500 and contradicting(frame).isna().all()


def test_compare_refuses_a_side_whose_median_contradicts_its_own_tflops(tmp_path, capsys):
    rows = pd.read_csv(HEADLINE)
    rows.to_csv(tmp_path / "base.csv", index=False)
    at = rows.index[rows["case_id"].eq("matmul/bf16-n8192")][0]
    rows.loc[at, "median_s"] *= 0.01
    rows.assign(run_id="new").to_csv(tmp_path / "new.csv", index=False)
    from gpubench.harness.commands.cli import main

    assert main(["compare", str(tmp_path / "base.csv"), str(tmp_path / "new.csv")]) == 2
    err = capsys.readouterr().err
    assert (
        f"{tmp_path / 'new.csv'}:{at + 2}: column median_s = " in err
        and "contradicts its own tflops" in err
    )


def test_a_median_a_fifth_off_its_own_figure_is_past_rounding_and_refused(tmp_path):
    rows = pd.read_csv(HEADLINE)
    at = rows.index[rows["case_id"].eq("transfer/h2d-256MiB-pinned-nb")][0]
    rows.loc[at, "median_s"] *= 1.2
    rows.to_csv(tmp_path / "run.csv", index=False)
    refused: list[str] = []
    load_results([tmp_path / "run.csv"], refused, [])
    [line] = refused
    assert "contradicts its own gbps" in line


def test_another_runs_rows_planted_in_a_file_do_not_take_its_own_rows_down(tmp_path):
    """A row's peers are its case's rows of its own run: a run's one elementwise row beside another
    run's row of the same case, 100 times off, stays."""
    rows = pd.read_csv(HEADLINE)
    case = rows[rows["case_id"].eq("elementwise/add-fp32-2^24")]
    planted = case.assign(run_id="someone-else", median_s=case["median_s"] * 100)
    pd.concat([case, planted]).to_csv(tmp_path / "run.csv", index=False)
    refused: list[str] = []
    frame = load_results([tmp_path / "run.csv"], refused, [])
    assert list(frame["run_id"]) == ["headline", "someone-else"] and refused == []
