"""What a reviewer's campaign over the reading side found: timestamps Python reads that no writer
writes, formulas behind leading whitespace, a lock file planted as a FIFO or folder, a file of
thousands of columns, a report killed between its two renames, rows refused without a word on
stderr. Runs are written through ResultsWriter (test_read_faults.run): nothing is measured."""

from __future__ import annotations

import os
import time

import pandas as pd
import pytest

from gpubench.harness.records.results_reader import read_frame
from gpubench.harness.records.schema import SchemaError, parse_cell
from gpubench.reports.render import publish
from gpubench.reports.render.build import build_report
from gpubench.reports.judge.load import spreadsheet_safe
from tests.test_read_faults import edited, run


@pytest.mark.parametrize(
    "stamp",
    [
        "2026-11-29T12:00:00",
        "2026-W48-2",
        "20261129T120000",
        "2026-11-29",
        "2026-11-29T12:00:00.123456789+00:00",
    ],
)
def test_a_timestamp_python_reads_but_no_writer_writes_is_damage(stamp):
    with pytest.raises(ValueError, match="with its offset"):
        parse_cell("timestamp_utc", stamp)


@pytest.mark.parametrize(
    "stamp", ["2026-11-29T12:00:00+14:00", "2026-11-29T12:00:00Z", "2026-11-29T12:00:00.5-03:30"]
)
def test_an_iso_timestamp_with_its_offset_is_read(stamp):
    assert parse_cell("timestamp_utc", stamp) == stamp


def test_a_naive_timestamp_beside_aware_ones_leaves_its_file_out_of_the_history_plot(
    tmp_path, capsys
):
    store = tmp_path / "store"
    run(store, "good")
    run(store, "later", timestamp_utc="2026-11-30T12:00:00+00:00")
    edited(run(store, "naive"), "timestamp_utc", "2026-11-29T13:00:00", at=None)
    # the plot raised ConversionError on a NaT
    build_report([store], tmp_path / "out", None)
    assert "naive.csv: line 2: column timestamp_utc" in capsys.readouterr().err


def test_a_run_starts_at_its_earliest_time_not_its_smallest_timestamp_text(tmp_path):
    from gpubench.reports.judge.history import run_figures
    from gpubench.reports.judge.load import load_results

    store = tmp_path / "store"
    run(store, "before")
    # 07:00 UTC, its text sorts last
    edited(run(store, "mixed"), "timestamp_utc", "2026-11-29T21:00:00+14:00", at=0)
    started = run_figures(load_results([store])).set_index("run_id")["started"]
    assert started["mixed"] == pd.Timestamp("2026-11-29T07:00:00", tz="UTC")


def test_a_formula_behind_leading_whitespace_is_inert_and_numbers_stay_numbers():
    frame = pd.DataFrame(
        {
            "hostname": [
                " =1+1",
                " \t@SUM(A1)",
                "\u00a0=1+1",
                "\uff1d1+1",
                "-1.5e3",
                " +2E-7",
                "node",
            ]
        }
    )
    assert list(spreadsheet_safe(frame)["hostname"]) == [
        "' =1+1",
        "' \t@SUM(A1)",
        "'\u00a0=1+1",
        "'\uff1d1+1",
        "-1.5e3",
        " +2E-7",
        "node",
    ]


# the report waited forever on the FIFO: a timeout turns that into a failure
@pytest.mark.timeout(30)
@pytest.mark.parametrize("plant", [os.mkfifo, os.mkdir])
def test_a_fifo_or_folder_at_the_lock_name_is_refused_in_one_line(tmp_path, plant):
    plant(tmp_path / ".out.lock")
    refused = pytest.raises(publish.UsageError, match=r"report lock .*\.out\.lock.*(FIFO|folder)")
    with refused, publish.report_folder(tmp_path / "out"):
        pass


def test_a_file_of_thousands_of_columns_is_refused_before_it_is_typed(tmp_path):
    path = run(tmp_path, "wide")
    lines = path.read_text(encoding="utf-8").splitlines()
    lines = [
        lines[0] + "".join(f",c{i}" for i in range(5000)),
        *(line + "," * 5000 for line in lines[1:]),
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    started = time.monotonic()
    with pytest.raises(SchemaError, match="5,1[0-9][0-9] columns"):
        read_frame([path])
    # typing them took about 10 s
    assert time.monotonic() - started < 2


def test_a_report_killed_between_its_renames_leaves_the_previous_one_to_the_next(
    tmp_path, monkeypatch
):
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").write_text("previous", encoding="utf-8")
    aside = tmp_path / ".out.0123456789abcdef.old"
    # what a report killed right after moving the previous one aside leaves
    os.rename(out, aside)
    publish._sweep(out)
    assert (out / "report.md").read_text(encoding="utf-8") == "previous" and not aside.exists()


def test_rows_refused_as_impossible_are_named_on_stderr_too(tmp_path, capsys):
    run(tmp_path / "store", "good")
    edited(run(tmp_path / "store", "bad"), "median_s", "1e309")
    build_report([tmp_path / "store"], tmp_path / "out", None)
    assert "bad.csv:2: column median_s = 1e309 is impossible" in capsys.readouterr().err


def test_an_empty_out_is_refused_naming_it_not_the_current_folder(tmp_path, monkeypatch, capsys):
    from gpubench.harness.commands.cli import main

    run(tmp_path / "in", "r1")
    monkeypatch.chdir(tmp_path)
    assert main(["report", str(tmp_path / "in"), "--out", ""]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out is empty" in err and str(tmp_path) not in err


def test_a_glyph_the_font_lacks_draws_without_a_warning_per_glyph(tmp_path, recwarn):
    import matplotlib.pyplot as plt

    from gpubench.reports.render.plots import _save

    fig, ax = plt.subplots()
    ax.set_title("node\N{FIRE}\N{MAN}")
    _save(fig, tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 0
    assert not [w for w in recwarn if "missing from" in str(w.message)]
