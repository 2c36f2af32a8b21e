"""What a report writes: merged.csv safe to open in a spreadsheet, labels that show what they hold
and fit a legend, and a report folder that appears whole, one report at a time, untouched by a
report that is refused or fails. Runs are written through ResultsWriter (test_read_faults.run)."""

from __future__ import annotations

import csv
import unicodedata
from pathlib import Path

import pandas as pd
import pytest
from test_read_faults import run

from gpubench.reports.render import build
from gpubench.reports.render.build import build_report
from gpubench.reports.judge.load import load_results, machine_labels
from gpubench.harness.core.exits import UsageError
from gpubench.reports.judge.text import INVISIBLE, MAX_LABEL_CHARS
from gpubench.reports.render.plots import MAX_PLOT_LABEL, _literal_dollars

# These tests read the report's files and folders, not its pixels (conftest.unrendered_plots); the
# two whose labels could stop a drawing (format characters, a 10,000-character name) are `drawn`.
pytestmark = pytest.mark.usefixtures("unrendered_plots")


def merged_cells(out: Path) -> list[dict[str, str]]:
    with open(out / "merged.csv", newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


# ---- merged.csv, labels --------------------------------------------------------------------------


def test_formulas_from_the_files_are_inert_in_merged_csv_and_numbers_stay_numbers(tmp_path):
    path = run(
        tmp_path / "runs", "r1", hostname="+cmd|' /C calc'!A0", reason="@SUM(A1)", flags="-2+3"
    )
    with open(path, newline="", encoding="utf-8") as handle:
        header, *records = list(csv.reader(handle))
    at = header.index("run_id")
    records = [[*r[:at], '=HYPERLINK("http://x")', *r[at + 1 :], "-1.5"] for r in records]
    # and a text column this version does not know
    with open(path, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([[*header, "from_a_newer_writer"], *records])
    build_report([path], tmp_path / "out", None)
    row = merged_cells(tmp_path / "out")[0]
    assert (row["run_id"], row["hostname"]) == ('\'=HYPERLINK("http://x")', "'+cmd|' /C calc'!A0")
    assert (row["reason"], row["flags"]) == ("'@SUM(A1)", "'-2+3")
    # numbers untouched
    assert row["from_a_newer_writer"] == "-1.5" and float(row["median_s"]) == 1e-3
    # the run's own file is as measured
    assert set(load_results([path])["hostname"]) == {"+cmd|' /C calc'!A0"}


@pytest.mark.drawn
def test_bidi_and_zero_width_characters_never_reach_report_md(tmp_path):
    # reads "nodeexe.png" with the override
    run(tmp_path / "runs", "r1", hostname="node\u202egnp.exe")
    run(tmp_path / "runs", "r2", hostname="node1\u200b", machine_id="m2")
    run(tmp_path / "runs", "r3", hostname="node1", machine_id="m3")
    text = build_report([tmp_path / "runs"], tmp_path / "out", None).read_text(encoding="utf-8")
    assert not [c for c in text if unicodedata.category(c) == "Cf"]
    # shown where they were
    assert "node\ufffdgnp.exe" in text and "node1\ufffd" in text
    # still three machines
    assert "on 3 configuration(s)" in text
    hosts = "".join(cell["hostname"] for cell in merged_cells(tmp_path / "out"))
    assert not [c for c in hosts if unicodedata.category(c) == "Cf"]


def test_every_format_character_is_made_visible():
    invisible = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf"]
    assert [c for c in invisible if not INVISIBLE.fullmatch(c)] == []


@pytest.mark.drawn
def test_a_10000_character_host_name_is_cut_in_labels_and_stays_unique(tmp_path):
    run(tmp_path / "runs", "r1", hostname="a" * 10_000 + "x")
    # one machine_id: only the name tells them apart
    run(tmp_path / "runs", "r2", hostname="a" * 10_000 + "y")
    frame = load_results([tmp_path / "runs"])
    labels = set(machine_labels(frame))
    assert len(labels) == 2 and all(
        len(label) < 3 * MAX_LABEL_CHARS and "…" in label for label in labels
    )
    plotted = _literal_dollars(frame.assign(model="m" * 5000))
    assert plotted["model"].str.len().max() <= MAX_PLOT_LABEL and plotted["hostname"].nunique() == 2
    text = build_report([tmp_path / "runs"], tmp_path / "out", None).read_text(encoding="utf-8")
    # the Machines table keeps the whole name, once
    assert sum(len(line) > 1000 for line in text.splitlines()) == 1


def test_plot_labels_escape_only_the_cells_that_need_it():
    frame = pd.DataFrame(
        {
            "hostname": ["a$b$", "plain", None, "a$b$"],
            "model": ["m" * 5000, "m", "x", "y"],
            "size": [1, 2, 3, 4],
        }
    )
    plotted = _literal_dollars(frame)
    assert plotted["hostname"].tolist()[:2] == ["a\\$b\\$", "plain"] and plotted[
        "hostname"
    ].isna().tolist() == [False, False, True, False]
    assert (
        plotted["model"].tolist()[1:] == ["m", "x", "y"]
        and len(plotted["model"][0]) <= MAX_PLOT_LABEL
    )
    assert plotted["size"].tolist() == [1, 2, 3, 4]


# ---- the report folder ---------------------------------------------------------------------------


@pytest.fixture()
def previous(tmp_path) -> Path:
    """--out holding a report of run r1, and a folder with run r2 to report instead."""
    build_report([run(tmp_path / "first", "r1")], tmp_path / "out", None)
    run(tmp_path / "second", "r2")
    return tmp_path / "out"


def snapshot(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def test_a_baseline_typo_leaves_the_previous_report_whole(previous, tmp_path):
    before = snapshot(previous)
    with pytest.raises(UsageError, match="--baseline 'nosuch' matches no machine_id or hostname"):
        build_report([tmp_path / "second"], previous, "nosuch")
    assert snapshot(previous) == before and sorted(p.name for p in tmp_path.iterdir()) == [
        "first",
        "out",
        "second",
    ]


def test_a_second_report_into_one_out_is_refused_while_the_first_writes(
    previous, tmp_path, monkeypatch
):
    render, refusals = build.render_report, []

    # another `gpubench report --out` starts now
    def render_while_another_starts(frame, out, *args, **kwargs):
        try:
            build_report([tmp_path / "first"], previous, None)
        except UsageError as error:
            refusals.append(str(error))
        return render(frame, out, *args, **kwargs)

    monkeypatch.setattr(build, "render_report", render_while_another_starts)
    build_report([tmp_path / "second"], previous, None)
    line = (
        f"another gpubench report is writing {previous} now — wait for it to finish, or pass "
        "another --out"
    )
    assert refusals == [line]
    assert "1 run(s)" in (previous / "report.md").read_text()
    assert {r["run_id"] for r in merged_cells(previous)} == {"r2"}


def test_a_report_replaces_the_previous_one_whole(previous, tmp_path):
    (previous / "old_plot.png").write_bytes(b"a plot of the previous report")
    build_report([tmp_path / "second"], previous, None)
    assert "old_plot.png" not in snapshot(previous) and {
        r["run_id"] for r in merged_cells(previous)
    } == {"r2"}
    # nothing left beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["first", "out", "second"]


def test_an_out_holding_other_files_is_refused_before_anything_is_written(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(
        UsageError, match=r"out holds notes.txt, which a report does not write: .* — pass a new"
    ):
        build_report([run(tmp_path / "runs", "r1")], tmp_path / "out", None)
    assert snapshot(tmp_path / "out") == {"notes.txt": b"mine"}


def test_a_killed_reports_leftovers_beside_out_are_removed_by_the_next(tmp_path):
    leftover = tmp_path / ".out.0123456789abcdef.partial"
    leftover.mkdir()
    (leftover / "merged.csv").write_text("half", encoding="utf-8")
    build_report([run(tmp_path / "runs", "r1")], tmp_path / "out", None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "runs"]


def test_a_report_into_a_team_store_under_umask_0_is_never_world_writable(tmp_path):
    import os
    import stat

    run(tmp_path / "in", "r1")
    old = os.umask(0)
    try:
        out = build_report([tmp_path / "in"], tmp_path / "store" / "reports" / "one", None)
    finally:
        os.umask(old)
    made = [tmp_path / "store", tmp_path / "store" / "reports", *out.rglob("*"), out]
    assert not [path for path in made if path.stat().st_mode & stat.S_IWOTH]
    assert not [path for path in made if path.is_file() and path.stat().st_mode & 0o111]
