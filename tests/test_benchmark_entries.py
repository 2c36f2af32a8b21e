"""pytest-benchmark's view of a case is one entry: a case's builds (separate pytest items, `-b<k>`)
merged into one benchmark named without the build, in a session
(gpubench.harness.pytest_plugin.benchmark_entries) and across the build processes of `gpubench run`
(gpubench.harness.commands.bench_table); and `--benchmark-histogram` without pygal ends the suite's
session as it ends plain pytest-benchmark's, with one line instead of two tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from pytest_benchmark.stats import Metadata
from runs import GPUBENCH, run_bench

from gpubench.harness.commands.bench_table import load_benchmarks
from gpubench.harness.pytest_plugin.benchmark_entries import enter_build
from gpubench.harness.pytest_plugin.compare_fail import HISTOGRAM_LINE

pytest_plugins = ["pytester"]

# the case parameter, as pytest-benchmark's params hold it
CASE = object()


def build_entry(build: int, samples: list[float]) -> SimpleNamespace:
    """pytest-benchmark's fixture after build `build` of matmul fp32-n512: its Metadata holds the
    build's samples."""
    param = f"fp32-n512-b{build}"
    fixture = SimpleNamespace(
        name=f"test_matmul[{param}]",
        fullname=f"benches/bench_matmul.py::test_matmul[{param}]",
        group="matmul",
        param=param,
        params={"case": CASE, "gpubench_build": build},
        extra_info={"build": build},
        cprofile_stats=None,
    )
    fixture.stats = Metadata(fixture, iterations=1, options={})
    for seconds in samples:
        fixture.stats.update(seconds)
    return fixture


def session_config(session: object) -> SimpleNamespace:
    """A config whose plugin "pytest-benchmark" is `session` (None: not found)."""
    plugins = {"pytest-benchmark": session}
    return SimpleNamespace(
        stash=pytest.Stash(), pluginmanager=SimpleNamespace(get_plugin=plugins.get)
    )


def test_a_cases_builds_are_one_entry_named_without_the_build():
    session = SimpleNamespace(benchmarks=[])
    config = session_config(session)
    for build, samples in enumerate([[1.0, 3.0], [2.0, 4.0], [5.0]]):
        fixture = build_entry(build, samples)
        # as the fixture's _add_stats does
        session.benchmarks.append(fixture.stats)
        enter_build(config, fixture, build, samples, "fp32-n512", own=True)
    (entry,) = session.benchmarks
    assert (entry.name, entry.fullname, entry.param) == (
        "test_matmul[fp32-n512]",
        "benches/bench_matmul.py::test_matmul[fp32-n512]",
        "fp32-n512",
    )
    assert entry.params == {"case": CASE} and entry.stats.data == [1.0, 3.0, 2.0, 4.0, 5.0]
    # over every build's samples
    assert entry.stats.median == 3.0 and entry.stats.rounds == 5
    assert entry.extra_info["build_medians_s"] == {"b0": 2.0, "b1": 3.0, "b2": 5.0}


def test_the_harness_timed_builds_of_one_test_join_its_entry():
    """gpubench.measure(setup=..., builds=2): pytest-benchmark times the first build, the harness
    the second."""
    session = SimpleNamespace(benchmarks=[])
    fixture = build_entry(0, [1.0, 2.0])
    # a user's test: not parametrized by the plugin
    fixture.stats.params = fixture.params = None
    session.benchmarks.append(fixture.stats)
    config = session_config(session)
    enter_build(config, fixture, 0, [1.0, 2.0], None, own=True)
    enter_build(config, fixture, 1, [3.0, 3.0], None, own=False)
    (entry,) = session.benchmarks
    assert entry.stats.data == [1.0, 2.0, 3.0, 3.0] and entry.extra_info["build_medians_s"] == {
        "b0": 1.5,
        "b1": 3.0,
    }


def test_without_pytest_benchmarks_session_each_build_stays_an_entry_of_its_own():
    """The fallback: a later build that cannot leave the session is not merged (its samples would
    count twice)."""
    session = SimpleNamespace(benchmarks=[])
    first, later = build_entry(0, [1.0]), build_entry(1, [2.0])
    session.benchmarks += [first.stats, later.stats]
    config = session_config(None)
    enter_build(config, first, 0, [1.0], "fp32-n512", own=True)
    enter_build(config, later, 1, [2.0], "fp32-n512", own=True)
    assert [entry.name for entry in session.benchmarks] == [
        "test_matmul[fp32-n512]",
        "test_matmul[fp32-n512-b1]",
    ]
    assert first.stats.stats.data == [1.0] and later.stats.stats.data == [2.0]


def build_file(folder: Path, build: int, samples: list[float] | None) -> Path:
    """One build process's JSON: its build of the case, named by the case (as benchmark_entries
    names it)."""
    stats = {
        "min": min(samples or [1.0]),
        "median": 0.0,
        "iterations": 1,
        **({"data": samples} if samples else {}),
    }
    bench = {
        "group": "matmul",
        "name": "test_matmul[fp32-n512]",
        "fullname": "bench_matmul.py::test_matmul[fp32-n512]",
        "param": "fp32-n512",
        "extra_info": {"build_medians_s": {f"b{build}": build + 1.0}},
        "stats": stats,
    }
    path = folder / f"build-{build}.json"
    path.write_text(json.dumps({"benchmarks": [bench]}))
    return path


def test_the_runs_table_holds_one_row_per_case_over_every_builds_samples(tmp_path):
    (bench,) = load_benchmarks(
        [build_file(tmp_path, 0, [1.0, 3.0]), build_file(tmp_path, 1, [2.0])]
    )
    assert (bench["name"], bench["rounds"], bench["median"], bench["min"]) == (
        "test_matmul[fp32-n512]",
        3,
        2.0,
        1.0,
    )
    assert (
        bench["extra_info"]["build_medians_s"] == {"b0": 1.0, "b1": 2.0} and bench["source"] == ""
    )


def test_a_build_file_without_its_samples_keeps_its_own_row(tmp_path):
    benches = load_benchmarks([build_file(tmp_path, 0, [1.0, 3.0]), build_file(tmp_path, 1, None)])
    assert [bench["min"] for bench in benches] == [1.0, 1.0] and len(benches) == 2


def test_compare_matches_each_case_once(one_case):
    """Saved, then compared: each case's row against its saved row, one pair; no build without a
    counterpart."""
    store = ("--builds=2", "--benchmark-storage=store")
    assert run_bench(one_case, *store, "--benchmark-save=base").ret == 0
    result = run_bench(one_case, *store, "--benchmark-compare=0001", "--benchmark-json=now.json")
    assert result.ret == 0, result.stdout.str()[-3000:]
    # by min
    rows = sorted(line.split()[0:2] for line in result.stdout.lines if line.startswith("test_tiny"))
    assert rows == [["test_tiny[n8]", "(0001_base)"], ["test_tiny[n8]", "(NOW)"]], (
        result.stdout.str()[-3000:]
    )
    (saved,) = json.loads(next((one_case.path / "store").rglob("0001_base.json")).read_text())[
        "benchmarks"
    ]
    (now,) = json.loads((one_case.path / "now.json").read_text())["benchmarks"]
    assert (
        saved["fullname"] == now["fullname"] == "bench_tiny.py::test_tiny[n8]"
        and "gpubench_build" not in now["params"]
    )
    assert sorted(now["extra_info"]["build_medians_s"]) == ["b0", "b1"]


@pytest.fixture
def no_pygal(monkeypatch):
    """pygal missing (the histogram's extra), whether or not this environment has it."""
    monkeypatch.setitem(sys.modules, "pygal", None)
    monkeypatch.delitem(sys.modules, "pytest_benchmark.histogram", raising=False)


def test_a_histogram_without_pygal_is_one_line_and_exit_1_as_without_gpubench(one_case, no_pygal):
    """Plain pytest-benchmark draws its table, then dies importing pygal: exit 1. The suite gave two
    tracebacks of it and exit 0."""
    result = run_bench(one_case, "--benchmark-histogram=hist")
    assert result.ret == 1, result.stdout.str()[-3000:] + result.stderr.str()[-3000:]
    assert (
        HISTOGRAM_LINE in result.stderr.lines
        and "Traceback" not in result.stdout.str() + result.stderr.str()
    )
    # the table, without its histogram
    assert "test_tiny[n8]" in result.stdout.str()


# gpubench run starts the builds as processes
@pytest.mark.process
def test_a_histogram_without_pygal_under_gpubench_run_fails_the_run_with_one_line(one_case):
    """Its builds are quiet (the run draws the table): pytest-benchmark never imported pygal there,
    exit 0."""
    one_case.makepyfile(
        nopygal="import sys\n\nsys.modules['pygal'] = None  # the histogram's extra missing\n"
    )
    # -p nopygal, in each build
    path = os.pathsep.join([str(one_case.path), os.environ["PYTHONPATH"]])
    done = subprocess.run(
        [
            *GPUBENCH,
            "run",
            "--device",
            "cpu",
            "--profile",
            "smoke",
            "--builds",
            "2",
            "--tests",
            str(one_case.path / "bench_tiny.py"),
            "--results-dir",
            str(one_case.path / "res"),
            "--no-report",
            "-p",
            "nopygal",
            "--benchmark-histogram=hist",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=one_case.path,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert (
        done.stderr.splitlines().count(HISTOGRAM_LINE) == 1
        and "Traceback" not in done.stdout + done.stderr
    )
