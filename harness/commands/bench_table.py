"""One pytest-benchmark table for a whole `gpubench run`: each build runs with --benchmark-quiet and
writes its JSON, and the table is drawn here from all of them with pytest-benchmark's own table
code, so a run of three builds shows one table, not three, with one row per case: each build's file
holds its build of a case under the case's name (gpubench.harness.pytest_plugin.benchmark_entries),
and their samples are merged here."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any
from gpubench.harness.core.console import CONSOLE

# pytest-benchmark's default columns (its utils.DEFAULT_COLUMNS from 5.3 on; earlier versions have
# no such name)
COLUMNS = (
    "min",
    "max",
    "mean",
    "stddev",
    "median",
    "iqr",
    "outliers",
    "ops",
    "rounds",
    "iterations",
)


def load_benchmarks(paths: list[Path]) -> list[dict[str, Any]]:
    """Every case's benchmark, its builds merged, flattened as pytest-benchmark's table expects; a
    file a build never wrote (it died, or ran no timed case) is skipped."""
    by_case: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for path in paths:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for bench in data.get("benchmarks", []) if isinstance(data, dict) else []:
            if isinstance(bench, dict) and isinstance(bench.get("stats"), dict):
                by_case.setdefault((bench.get("group"), bench.get("fullname")), []).append(bench)
    # no source: the plain test name
    return [
        {**bench, **bench["stats"], "source": ""}
        for builds in by_case.values()
        for bench in merged(builds)
    ]


def merged(builds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A case's builds, one file each, as one benchmark over all their samples; without the samples
    (a JSON written without them) each build stays a row of its own."""
    samples = [bench["stats"].get("data") for bench in builds]
    if len(builds) == 1 or not all(isinstance(data, list) and data for data in samples):
        return builds
    from pytest_benchmark.stats import Stats

    stats = Stats()
    for seconds in (value for data in samples for value in data):
        stats.update(seconds)
    first = builds[0]
    medians = {
        key: value
        for bench in builds
        for key, value in dict((bench.get("extra_info") or {}).get("build_medians_s") or {}).items()
    }
    extra_info = {**(first.get("extra_info") or {}), "build_medians_s": medians}
    return [
        {
            **first,
            "extra_info": extra_info,
            "stats": {
                **stats.as_dict(),
                "data": stats.data,
                "iterations": first["stats"].get("iterations"),
            },
        }
    ]


def print_one_table(paths: list[Path], verbose: bool = False) -> int:
    """Prints the run's table and returns how many benchmarks it shows (each build printed its own
    under --benchmark-verbose). It comes after the rows are written, so nothing in it may fail the
    run."""
    if verbose:
        return 0
    try:
        # merging a case's builds reads their samples: numbers, as they wrote
        benchmarks = load_benchmarks(paths)
        if not benchmarks:
            return 0
        draw_table(benchmarks)
    # pytest-benchmark's internals differ by version
    except Exception as error:
        CONSOLE.say(
            f"no combined pytest-benchmark table ({type(error).__name__}: {error}); "
            "the run's rows are in its CSV"
        )
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
    table = TableResults(
        columns=list(COLUMNS),
        sort="min",
        histogram=False,
        name_format=NAME_FORMATTERS["normal"],
        logger=Logger(Logger.QUIET),
        scale_unit=partial(pytest_benchmark_scale_unit, config=None),
    )
    table.display(TerminalReporter(), groups, progress_reporter=report_noprogress)
