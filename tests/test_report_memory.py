"""Reading results takes memory in proportion to the file: its records are typed a chunk at a time,
never all held as text, and a read buffer is the file's size, not the 256 MiB a results file may
reach. Checked as the peak of Python's allocations (tracemalloc) per byte of a few-MB file, not as a
time."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pandas as pd

from gpubench.harness.records.results_reader import read_frame
from gpubench.reports.judge.load import load_results

SMOKE = Path(__file__).resolve().parent.parent / "reports" / "examples" / "h200" / "smoke.csv"
# peak allocation per byte of CSV while reading it: the typed frame and one chunk of text (a whole
# file's records as Python text took 10 bytes per byte, a read buffer of the limit 256 MiB whatever
# the file's size)
MAX_PEAK_PER_BYTE = 5.5


def big_file(tmp_path: Path, runs: int = 60) -> Path:
    """The smoke run's rows as `runs` runs in one file (about 6 MB)."""
    rows = pd.read_csv(SMOKE)
    many = pd.concat([rows.assign(run_id=f"run-{k:03d}") for k in range(runs)], ignore_index=True)
    path = tmp_path / "big.csv"
    many.to_csv(path, index=False)
    return path


def peak_per_byte(path: Path, read) -> float:
    tracemalloc.start()
    try:
        read(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak / path.stat().st_size


def test_reading_a_large_file_allocates_in_proportion_to_it(tmp_path):
    path = big_file(tmp_path)
    assert path.stat().st_size > 5e6
    assert peak_per_byte(path, lambda p: read_frame([p])) < MAX_PEAK_PER_BYTE
    assert peak_per_byte(path, lambda p: load_results([p], [], [])) < MAX_PEAK_PER_BYTE
