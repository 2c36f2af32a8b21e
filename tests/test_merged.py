"""merged.csv written column by column (gpubench.reports.judge.merged) holds the same bytes as
the row writer (tests/frames.write_frame: to_cell of each typed value), hostile and odd cells
included."""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd

from frames import write_frame
from gpubench.reports.judge.load import LABELS, load_results, spreadsheet_safe, write_merged

EXAMPLES = Path(__file__).resolve().parent.parent / "reports" / "examples"
# schema 3 and schema 1
CPU, H200 = EXAMPLES / "cpu-2core-quick.csv", EXAMPLES / "h200-quick.csv"
# Cells a spreadsheet would run, that need quoting, or that a number-looking text must keep as
# written.
HOSTILE = [
    "=1+1",
    " =1+1",
    "\t@SUM(A1)",
    "-1.5",
    "+7",
    "a,b",
    'say "hi"',
    "\uff1d1",
    "x\u00a0y",
    "Ünï 名前",
    "",
]


def hostile_copy(src: Path, dst: Path) -> Path:
    """`src` with hostile host names and reasons, odd numbers, samples written as integers, a
    missing boolean and a column a newer writer added."""
    with open(src, newline="", encoding="utf-8") as handle:
        header, *rows = list(csv.reader(handle))
    header.append("future_column")
    at = {name: index for index, name in enumerate(header)}
    for number, row in enumerate(rows):
        text = HOSTILE[number % len(HOSTILE)]
        row[at["hostname"]], row[at["reason"]] = text, text if row[at["status"]] != "ok" else ""
        # beyond a float's exact integers
        row[at["ram_bytes"]] = str(2**60 + 1) if number % 2 else "1073741824"
        row[at["cv"]] = ("1e-05", "1e+16", "0.1", "", "3")[number % 5]
        row[at["pinned"]] = "" if number % 3 else row[at["pinned"]]
        row[at["samples_s"]] = "[1, 2, 0.5]" if number % 4 == 0 else row[at["samples_s"]]
        row.append(("=2", "7", "", "text")[number % 4])
    with open(dst, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([header, *rows])
    return dst


def test_merged_csv_is_byte_identical_to_the_row_writer(tmp_path):
    frame = spreadsheet_safe(load_results([hostile_copy(CPU, tmp_path / "cpu.csv"), H200], [], []))
    # the hostile cells reached the writers
    assert {"' =1+1", "'=1+1", "-1.5"} <= set(frame["hostname"])
    write_merged(frame, tmp_path / "merged.csv")
    write_frame(frame, tmp_path / "rows.csv", [c for c in frame.columns if c not in LABELS])
    assert (tmp_path / "merged.csv").read_bytes() == (tmp_path / "rows.csv").read_bytes()


def test_merged_csv_cells_of_every_kind(tmp_path):
    frame = load_results([hostile_copy(CPU, tmp_path / "cpu.csv")], [], [])
    write_merged(frame.head(5), tmp_path / "merged.csv")
    merged = pd.read_csv(tmp_path / "merged.csv", dtype=str, keep_default_na=False)
    # an int column read as floats is written as ints
    assert list(merged["cpu_cores"]) == ["2"] * 5
    assert list(merged["ram_bytes"]) == [
        "1073741824",
        str(2**60),
        "1073741824",
        str(2**60),
        "1073741824",
    ]
    assert list(merged["cv"]) == ["1e-05", "1e+16", "0.1", "", "3.0"]
    assert merged["samples_s"].iloc[0] == "[1.0, 2.0, 0.5]"
    assert list(merged["future_column"]) == ["=2", "7", "", "text", "=2"]
