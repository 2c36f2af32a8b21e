"""A run is its rows, not the run id a column names: two sides that name one run id but hold other
figures are not called the same run."""

from __future__ import annotations

from pathlib import Path

from gpubench.reports.judge.compare import side_differences
from gpubench.reports.judge.load import load_results

EXAMPLE = Path(__file__).resolve().parent.parent / "reports" / "examples" / "cpu-2core-quick.csv"


def test_a_file_reusing_bases_run_id_with_other_figures_is_not_the_same_run():
    base = load_results([EXAMPLE])
    new = base.assign(median_s=base["median_s"] * 1.5)
    notes = side_differences(base, new)
    assert "note: BASE and NEW are the same run(s)" not in notes
    [note] = [note for note in notes if "both name run(s)" in note]
    assert "hold other figures: not one run" in note
    # one run given twice
    assert "note: BASE and NEW are the same run(s)" in side_differences(base, base.copy())
