import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # tests/fakes.py, tests/runs.py
# The processes the tests start (gpubench run, pytester's pytest, torchrun's ranks) import the
# harness beside these tests, not whichever checkout the environment's editable install points at.
REPO = str(Path(__file__).resolve().parent.parent)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))

from process_guard import _no_processes, pytest_addoption, pytest_configure  # noqa: E402,F401 - the fast loop's guard
from runs import ONE_CASE_BENCH  # noqa: E402 - found through the path above


@pytest.fixture
def one_case(pytester, monkeypatch):
    """A pytester folder holding the one-case bench (bench_tiny.py), with downloads off and an
    out/ folder where an earlier run's taken.csv already lies. The module using it loads pytester
    (pytest_plugins = ["pytester"])."""
    monkeypatch.setenv("GPUBENCH_DOWNLOAD", "0")
    pytester.makepyfile(bench_tiny=ONE_CASE_BENCH)
    (pytester.path / "out").mkdir()
    (pytester.path / "out" / "taken.csv").write_text("an earlier run\n")
    return pytester


@pytest.fixture(autouse=True)
def not_a_subreaper_after_the_test():
    """`gpubench run` and `ab` make their process the subreaper of its builds (lifetime.adopt_orphans); a test
    that calls them in-process must not leave the whole test session adopting every later test's orphans."""
    yield
    from gpubench.harness.processes.lifetime import adopting, stop_adopting

    if adopting():
        stop_adopting()
