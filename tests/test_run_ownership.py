"""A run's rows are those of the file that wrote it, not every row whose run_id column names it: in
a team's store another member's file holding rows of a run (an extra build, other figures) is not
merged into it, and is named; a conflicting copy of a run leaves the rest of the store reported."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from gpubench.harness.core.exits import UsageError
from gpubench.reports.render.build import build_report
from gpubench.reports.judge.load import load_results
from gpubench.reports.judge.ownership import dedupe, owned_rows, writer

# These tests read the report's text, not its pixels (conftest.unrendered_plots).
pytestmark = pytest.mark.usefixtures("unrendered_plots")

HEADLINE = Path(__file__).resolve().parent.parent / "reports" / "examples" / "h200" / "headline.csv"
TIMES = ["median_s", "min_s", "mean_s", "iqr_s", "stddev_s", "round_s"]
RATES = ["tflops", "gbps", "pct_of_peak", "pct_of_peak_gbps"]


def run_rows(run_id: str) -> pd.DataFrame:
    rows = pd.read_csv(HEADLINE)
    return rows.assign(run_id=run_id)


def faster(rows: pd.DataFrame, factor: float) -> pd.DataFrame:
    """The rows `factor` times faster, every time and rate along: figures that agree with
    themselves."""
    out = rows.copy()
    out[TIMES] = out[TIMES] / factor
    out[RATES] = out[RATES] * factor
    return out


def team_store(tmp_path: Path) -> tuple[Path, Path, Path]:
    """alice's run in her machine's folder; bob's file in his holds his run and an extra build of
    alice's, every figure 2% faster (figures that pass every bound)."""
    alice = tmp_path / "store" / "vm-36ac6243" / "alice-run.csv"
    bob = tmp_path / "store" / "bobbox-0badc0de" / "bob-run.csv"
    alice.parent.mkdir(parents=True)
    bob.parent.mkdir(parents=True)
    run_rows("alice-run").to_csv(alice, index=False)
    extra = faster(run_rows("alice-run"), 1.02).assign(build=1, builds=2)
    mine = run_rows("bob-run").assign(hostname="bobbox", machine_id="0badc0de0000")
    pd.concat([mine, extra]).to_csv(bob, index=False)
    return tmp_path / "store", alice, bob


def test_another_members_rows_naming_a_run_are_not_merged_into_it(tmp_path, capsys):
    store, alice, bob = team_store(tmp_path)
    report = build_report([store], tmp_path / "out", None).read_text(encoding="utf-8")
    merged = pd.read_csv(tmp_path / "out" / "merged.csv")
    mine = merged[merged["run_id"] == "alice-run"]
    assert len(mine) == len(run_rows("alice-run")) and set(mine["build"]) == {0}
    assert set(merged["run_id"]) == {"alice-run", "bob-run"}
    err = capsys.readouterr().err
    [line] = [line for line in err.splitlines() if str(bob) in line]
    assert (
        "row(s) naming run alice-run" in line
        and f"which {alice} wrote" in line
        and "(owner " in line
    )
    assert "not merged into that run" in report


def test_a_copy_of_the_run_counts_once_and_is_not_named(tmp_path):
    store, alice, _ = team_store(tmp_path)
    backup = store / "backup"
    backup.mkdir()
    (backup / "alice-copy.csv").write_bytes(alice.read_bytes())
    frame = load_results([store], [], [])
    notes: list[str] = []
    kept = owned_rows(frame, notes)
    assert not any("alice-copy" in note for note in notes)
    deduped, said = dedupe(kept, [])
    assert (deduped["run_id"] == "alice-run").sum() == len(run_rows("alice-run"))
    assert any("counted once" in note for note in said)


def test_a_conflicting_copy_no_file_wrote_leaves_the_store_reported_as_two_runs(tmp_path, capsys):
    store = tmp_path / "store"
    store.mkdir()
    rows = run_rows("nightly")
    rows.to_csv(store / "a.csv", index=False)
    other = rows.copy()
    other.loc[0, TIMES] = other.loc[0, TIMES] * 2
    other.loc[0, RATES] = other.loc[0, RATES] / 2
    other.to_csv(store / "b.csv", index=False)
    build_report([store], tmp_path / "out", None)
    merged = pd.read_csv(tmp_path / "out" / "merged.csv")
    assert sorted(set(merged["run_id"])) == ["nightly@1", "nightly@2"] and len(merged) == 2 * len(
        rows
    )
    err = capsys.readouterr().err
    assert "run nightly is in 2 files with other rows" in err and str(store / "a.csv") in err


def test_a_case_held_twice_in_one_file_leaves_that_run_out_of_a_store_and_refuses_a_named_file(
    tmp_path,
):
    store = tmp_path / "store"
    store.mkdir()
    rows = run_rows("twice")
    twice = pd.concat([rows, faster(rows.iloc[[1]], 1.1)])
    twice.to_csv(store / "twice.csv", index=False)
    run_rows("fine").to_csv(store / "fine.csv", index=False)
    left_out: list[str] = []
    frame, _ = dedupe(load_results([store], [], left_out), left_out)
    assert set(frame["run_id"]) == {"fine"}
    assert any(
        "holds matmul/fp32-n8192 build 0 twice" in line and "left out" in line for line in left_out
    )
    with pytest.raises(UsageError, match="twice with different figures"):
        dedupe(load_results([store / "twice.csv"]))
    with pytest.raises(UsageError, match="twice with different figures"):
        build_report([store / "twice.csv"], tmp_path / "out", None)
    assert not (tmp_path / "out").exists()


def test_the_writer_is_the_file_named_after_the_run_else_none(tmp_path):
    assert writer("r1", ["/s/a/r1.csv", "/s/b/other.csv"]) == "/s/a/r1.csv"
    assert writer("r1", ["/s/a/x.csv", "/s/b/y.csv"]) is None
    first, second = tmp_path / "a" / "r1.csv", tmp_path / "b" / "r1.csv"
    for path in (first, second):
        path.parent.mkdir()
        path.write_text("")
    assert writer("r1", [str(first), str(second)]) is None
    (second.parent / "r1.exit.json").write_text("{}")
    assert writer("r1", [str(first), str(second)]) == str(second)


def test_another_files_rows_of_a_run_without_a_median_are_not_taken_for_a_copy(tmp_path):
    """A skipped or failed build has no median: its rows still differ from the run's own."""
    store, alice, bob = team_store(tmp_path)
    skipped = run_rows("alice-run").assign(
        build=1, builds=2, status="failed", median_s=None, reason="crashed"
    )
    pd.concat([run_rows("bob-run"), skipped]).to_csv(bob, index=False)
    left_out: list[str] = []
    frame, _ = dedupe(load_results([store], [], left_out), left_out)
    assert set(frame.loc[frame["run_id"].eq("alice-run"), "build"]) == {0}
    assert any(str(bob) in line and "naming run alice-run" in line for line in left_out)
