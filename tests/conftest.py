import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# tests/fakes.py, tests/runs.py
sys.path.insert(0, str(Path(__file__).parent))
# The processes the tests start (gpubench run, pytester's pytest, torchrun's ranks) import the
# harness beside these tests, not whichever checkout the environment's editable install points at.
REPO = str(Path(__file__).resolve().parent.parent)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))

from process_guard import _no_processes, pytest_addoption  # noqa: E402,F401 - the fast loop's guard
from process_guard import pytest_configure as guard_configure  # noqa: E402
from runs import ONE_CASE_BENCH  # noqa: E402 - found through the path above
from unrendered import plots_unrendered  # noqa: E402


def pytest_configure(config):
    guard_configure(config)
    ctrl_c_as_a_terminal_gives_it()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # One of `make check`'s workers, each on a core: torch's own pool (a thread per core in
        # every worker) would have the workers' threads queue for the same cores.
        import torch

        torch.set_num_threads(1)


@pytest.hookimpl(wrapper=True, optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """`-n auto` for the whole suite (make test): half as many workers again as cores. Its process
    tests spend about a quarter of their time waiting on what they started (a budget running out, a
    timeout, a grace, a hung rank), and a core waits with them; the third worker on a 2-core machine
    took `make test` from 461 s to 400 s. The fast loop (--no-processes), busy on its cores alone,
    keeps one worker per core; PYTEST_XDIST_AUTO_NUM_WORKERS, where set, is taken as it is."""
    cores = yield
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS") or config.getoption("--no-processes"):
        return cores
    return cores + (cores + 1) // 2


def ctrl_c_as_a_terminal_gives_it() -> None:
    """A shell starts a background job (`make test &`, nohup) with SIGINT ignored, and every process
    a test starts would inherit that: Python installs no Ctrl-C handler then, so a run sent SIGINT
    by a test measures on and exits 0. The Ctrl-C tests ask what a terminal's Ctrl-C does: Python's
    handler here, SIG_DFL in each child after exec."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def machine_info_in_process(monkeypatch):
    """For pytest runs inside this process: pytest-benchmark's machine info comes from py-cpuinfo,
    which starts dmesg and lscpu each time it is asked; these tests read gpubench's rows and JSON
    fields, not its CPU name."""
    import platform

    import pytest_benchmark.plugin

    monkeypatch.setattr(
        pytest_benchmark.plugin,
        "get_cpu_info",
        lambda: {"brand_raw": platform.processor(), "arch_string_raw": platform.machine()},
    )


@pytest.fixture
def one_case(pytester, monkeypatch, machine_info_in_process):
    """A pytester folder holding the one-case bench (bench_tiny.py), with downloads off and an
    out/ folder where an earlier run's taken.csv already lies. The module using it loads pytester
    (pytest_plugins = ["pytester"])."""
    monkeypatch.setenv("GPUBENCH_DOWNLOAD", "0")
    pytester.makepyfile(bench_tiny=ONE_CASE_BENCH)
    (pytester.path / "out").mkdir()
    (pytester.path / "out" / "taken.csv").write_text("an earlier run\n")
    # a plugin module the test writes there (-p NAME) imports in an in-process run too
    pytester.syspathinsert()
    return pytester


@pytest.fixture(autouse=True)
def builds_are_not_xdist_workers(monkeypatch):
    """Under pytest-xdist a worker's PYTEST_XDIST_* variables would pass to the processes a test
    starts, and pytest-benchmark turns itself off in a process that sees them: a build would then
    refuse --benchmark-only."""
    for name in [name for name in os.environ if name.startswith("PYTEST_XDIST_")]:
        monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
def one_console_on_standard_streams():
    """A test reads the console's lines where a person would, on the standard streams (capsys), not
    on this test session's own terminal, which the plugin gave the one console; a test that
    configures the plugin with a fake config, or calls a command in this process, leaves no screen
    or voice of its own to the next."""
    from gpubench.harness.core.console import CONSOLE

    screen, voice = CONSOLE.screen, CONSOLE.voice
    CONSOLE.detach()
    yield
    CONSOLE.attach(screen)
    CONSOLE.speak_as(voice)


# The look's window for a run inside this process (seconds): a few clock ticks.
IN_PROCESS_LOOK_S = 0.05


@pytest.fixture(autouse=True)
def a_short_look_in_process(monkeypatch):
    """A run's look at the machine before its first case spans LOOK_WINDOW_S (0.3 s) from the run's
    set-up, enough clock ticks to say who used the cores; a gpubench process takes longer than that
    to get there, a pytest run inside this one does not, and slept the rest: 0.3 s of nothing per
    build of the suite's in-process runs, where what the look reads is the other workers' load. Here
    it spans IN_PROCESS_LOOK_S; the look's own tests fake what it reads (LoadMeter.busy_frac)."""
    from gpubench.harness.pytest_plugin import machine_look

    full = machine_look.look

    def short_look(meter, device, window_s=IN_PROCESS_LOOK_S):
        return full(meter, device, min(window_s, IN_PROCESS_LOOK_S))

    monkeypatch.setattr(machine_look, "look", short_look)


@pytest.fixture(autouse=True)
def not_a_subreaper_after_the_test():
    """`gpubench run` and `ab` make their process the subreaper of its builds
    (lifetime.adopt_orphans); a test that calls them in-process must not leave the whole test
    session adopting every later test's orphans."""
    yield
    from gpubench.harness.processes.lifetime import PR_SET_CHILD_SUBREAPER, adopting, prctl

    if adopting():
        prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


@pytest.fixture
def unrendered_plots(request) -> Iterator[None]:
    """For report tests that check tables, notes, links and files, not pixels: plots_unrendered for
    the test. A test marked `drawn` keeps real drawing."""
    if request.node.get_closest_marker("drawn"):
        yield
        return
    with plots_unrendered():
        yield


@pytest.fixture(scope="session")
def example_report(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The example report's text as this code writes it from the committed example runs
    (reports/examples/*.csv, baseline vm), its plots unrendered: built once per worker for the tests
    that read it (its length, its sentences, that it is the committed report.md)."""
    from gpubench.reports.render.build import build_report

    examples = Path(REPO) / "reports" / "examples"
    out = tmp_path_factory.mktemp("example") / "report"
    with plots_unrendered():
        report = build_report(sorted(examples.glob("*.csv")), out, "vm")
    return report.read_text(encoding="utf-8")
