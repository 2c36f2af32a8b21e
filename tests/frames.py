"""A read frame written back as a results CSV row by row, each cell as ResultsWriter writes it
(to_cell of its typed value): what merged.csv's column writer (gpubench.reports.judge.merged)
must equal byte for byte, and the A/B tests' sides."""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd

from gpubench.harness.records.results_reader import frame_rows
from gpubench.harness.records.schema import to_cell


def write_frame(frame: pd.DataFrame, path: Path, columns: list[str]) -> None:
    """`columns` of a read frame as one results CSV."""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        writer.writerows([to_cell(row[c]) for c in columns] for row in frame_rows(frame[columns]))
