"""One pytest-benchmark table for a whole `gpubench run`: each build runs with --benchmark-quiet and writes its
JSON, and the table is drawn here from all of them with pytest-benchmark's own table code, so a run of three
builds shows one table, not three."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

# pytest-benchmark's default columns (its utils.DEFAULT_COLUMNS from 5.3 on; earlier versions have no such name)
COLUMNS = ("min", "max", "mean", "stddev", "median", "iqr", "outliers", "ops", "rounds", "iterations")


def load_benchmarks(paths: list[Path]) -> list[dict[str, Any]]:
    """Every build's benchmarks, flattened as pytest-benchmark's table expects; a file a build never wrote (it
    died, or ran no timed case) is skipped."""
    benchmarks = []
    for path in paths:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for bench in data.get("benchmarks", []) if isinstance(data, dict) else []:
            if isinstance(bench, dict) and isinstance(bench.get("stats"), dict):
                benchmarks.append({**bench, **bench["stats"], "source": ""})  # no source: the plain test name
    return benchmarks


def print_one_table(paths: list[Path], verbose: bool = False) -> int:
    """Prints the run's table and returns how many benchmarks it shows (each build printed its own under
    --benchmark-verbose). It comes after the rows are written, so nothing in it may fail the run."""
    benchmarks = load_benchmarks(paths)
    if verbose or not benchmarks:
        return 0
    try:
        draw_table(benchmarks)
    except Exception as error:  # noqa: BLE001 - pytest-benchmark's internals differ by version
        print(f"gpubench: no combined pytest-benchmark table ({type(error).__name__}: {error}); "
              "the run's rows are in its CSV")
        return 0
    return len(benchmarks)


def draw_table(benchmarks: list[dict[str, Any]]) -> None:
    """pytest-benchmark's own table code, as its `pytest-benchmark compare` draws saved runs."""
    from pytest_benchmark.cli import TerminalReporter
    from pytest_benchmark.logger import Logger
    from pytest_benchmark.plugin import pytest_benchmark_group_stats, pytest_benchmark_scale_unit
    from pytest_benchmark.table import TableResults
    from pytest_benchmark.utils import NAME_FORMATTERS, report_noprogress

    groups = pytest_benchmark_group_stats(config=None, benchmarks=benchmarks, group_by="group")
    table = TableResults(columns=list(COLUMNS), sort="min", histogram=False, name_format=NAME_FORMATTERS["normal"],
                         logger=Logger(Logger.QUIET), scale_unit=partial(pytest_benchmark_scale_unit, config=None))
    table.display(TerminalReporter(), groups, progress_reporter=report_noprogress)
