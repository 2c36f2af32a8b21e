"""pytest plugin: gpubench's options and hooks only. Validation before any case (one line, exit
4), the session's synced clock named as pytest-benchmark's timer, case x build parametrization
with builds interleaved (build 0 of every case, then build 1, ...), and the run's lifecycle hooks.
The `gpubench` fixture lives in harness.pytest_plugin.fixture, the records in harness.measurement.session.

A bench module names its workload (`gpubench_workload = WORKLOAD` of a harness.workloads module)
and has one test that calls `gpubench.run(case)`.
"""

from __future__ import annotations

import inspect
import signal
import sys
from typing import Any

import pytest

from harness.processes.lifetime import HELD_INTERRUPT  # torch-free

HELD_INTERRUPT.hold()  # at import, before harness.pytest_plugin.fixture imports torch (the longest of the windows)

from harness.pytest_plugin.fixture import Recorder  # after the interrupt is held
from harness.core.exits import ExitCode
from harness.core.options import RUN_OPTIONS
from harness.records.results import ResultsFull
from harness.pytest_plugin.run_state import RunState, Terminated
from harness.measurement.session import Stop
from harness.pytest_plugin.build_setup import SetupError, make_state
from harness.pytest_plugin.build_answer import add_build_options, answer_writer, apply_build_options
from harness.measurement.workload import as_workload

STATE = pytest.StashKey[RunState]()
SESSION = pytest.StashKey[pytest.Session]()
# Signals that stop the run with the case in progress unwound (its DDP workdir removed) and the
# session closed (the environment sidecar written): SIGTERM (a scheduler) and SIGHUP (the terminal
# closed). The exit status is 128 + the first one's number, as a shell reports a process it ended.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
ENDED_BY = pytest.StashKey[int]()
PREVIOUS_HANDLERS = pytest.StashKey[dict[int, Any]]()
MARKERS = {
    "slow": "long cases: training epochs, distributed runs (deselect with -m 'not slow')",
    "training": "cases that train a model",
    "distributed": "cases that start several processes (DDP, DataParallel)",
    "gpu": "cases that need an accelerator (skipped rows on a CPU-only machine)",
}
class _OptionNames:
    """A stand-in parser that only records the option names a plugin's pytest_addoption declares."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def getgroup(self, *args: Any, **kwargs: Any) -> "_OptionNames":
        return self

    def addoption(self, *names: str, **kwargs: Any) -> None:
        self.names.update(names)

    def addini(self, *args: Any, **kwargs: Any) -> None:
        pass


def taken_flags(pluginmanager: pytest.PytestPluginManager) -> set[str]:
    """Option strings the other registered plugins declare (pytest-profiling has --profile), read
    by calling their pytest_addoption on a recording stand-in: pytest has no public list of them."""
    recorder = _OptionNames()
    for plugin in pluginmanager.get_plugins():
        hook = getattr(plugin, "pytest_addoption", None)
        if hook is None or plugin is sys.modules[__name__]:
            continue
        try:
            parameters = inspect.signature(hook).parameters
            hook(**{k: v for k, v in (("parser", recorder), ("pluginmanager", pluginmanager)) if k in parameters})
        except Exception:  # noqa: BLE001 - a plugin that cannot declare into a stand-in owns nothing we can see
            continue
    return recorder.names


@pytest.hookimpl(trylast=True)
def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """Every option has a namespaced form (`--gpubench-profile`) that cannot collide with another
    plugin, and the short form (`--profile`) unless another plugin already took it."""
    group = parser.getgroup("gpubench")
    taken = taken_flags(pluginmanager)
    for option in RUN_OPTIONS:
        names = [option.namespaced] + ([] if option.flag in taken else [option.flag])
        group.addoption(*names, **option.kwargs(dest=option.pytest_dest))
    add_build_options(group)


@pytest.hookimpl(tryfirst=True)  # before pytest-benchmark's own configure, which loads the timer
def pytest_configure(config: pytest.Config) -> None:
    """Validate everything before the first case: a bad value is one line and exit code 4."""
    if HELD_INTERRUPT.pending:  # Ctrl-C while pytest loaded the plugins: an interrupt of the session, exit 2 (later ones stay held)
        HELD_INTERRUPT.pending = False
        raise KeyboardInterrupt
    HELD_INTERRUPT.release(then=HELD_INTERRUPT.raise_once)  # in the session: the first Ctrl-C raises, later ones are held
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    apply_build_options(config)
    try:
        state, warning = make_state(config.getoption, getattr(config.option, "benchmark_timer", None),
                                    collect_only=config.getoption("collectonly"), benchmark_json=getattr(config.option, "benchmark_json", None))
    except SetupError as error:
        raise pytest.UsageError(str(error)) from None
    if warning:
        sys.stderr.write(f"gpubench: WARNING: {warning}\n")
    if hasattr(config.option, "benchmark_timer"):
        config.option.benchmark_timer = "harness.measurement.timing.session_clock"  # pytest-benchmark's public --benchmark-timer
    config.stash[STATE] = state


def pytest_sessionstart(session: pytest.Session) -> None:
    """SIGTERM and SIGHUP become an interrupt that lets the case in progress clean up."""
    session.config.stash[SESSION] = session  # its exit status, set again at unconfigure for a held Ctrl-C
    state = session.config.stash.get(STATE, None)
    if state is None:
        return

    def terminate(signum: int, frame: Any) -> None:
        if state.session.terminated:  # a second signal (the group's, then gpubench run's forwarded one) must not cut the cleanup short
            return
        state.session.terminated = True
        session.config.stash[ENDED_BY] = signum
        raise Terminated(f"{signal.Signals(signum).name}: the case in progress was not recorded; the finished rows are whole")

    try:
        session.config.stash[PREVIOUS_HANDLERS] = {signum: signal.signal(signum, terminate) for signum in STOP_SIGNALS}
    except ValueError:  # not the main thread (pytest embedded somewhere): keep the default
        pass


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """After the results folder filled up, or SIGTERM, the remaining cases are not run (nor
    reported): the run ends with one line instead of pytest's interrupt banner."""
    state = item.config.stash.get(STATE, None)
    return True if state is not None and (state.session.stop or state.session.terminated) else None


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: before pytest-benchmark writes its files
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> Any:
    """The session's records are closed here, before the exit status is decided: an environment
    sidecar the disk could not take at the end is lost data, and the run exits 75 for it. From
    here to unconfigure, Ctrl-C is held (HeldInterrupt)."""
    HELD_INTERRUPT.hold()
    close_session(session)
    return (yield)


def close_session(session: pytest.Session) -> None:
    state = session.config.stash.get(STATE, None)
    if state is not None and state.session.is_open:
        try:
            state.session.close()
        except ResultsFull as full:
            state.session.stop = state.session.stop or Stop(str(full), ExitCode.RESULTS_FULL)
    if state is not None and state.session.terminated:
        session.exitstatus = 128 + session.config.stash.get(ENDED_BY, signal.SIGTERM)
    elif state is not None and state.session.stop:
        session.exitstatus = state.session.stop.code  # results full (75) or run id taken (4): gpubench run starts no further build


def pytest_unconfigure(config: pytest.Config) -> None:
    """The stop line comes last, after pytest's summary, where it is seen."""
    from harness.measurement.timing import install_session_clock

    session = config.stash.get(SESSION, None)
    if session is not None:
        end_session_interrupts(config, session)
    else:  # ended before its session (a usage error): Python's handler back for an embedding host
        HELD_INTERRUPT.release()
    state = config.stash.get(STATE, None)
    answer = answer_writer(config)
    if answer is not None and state is not None:
        stop = [state.session.stop.line] if state.session.stop else []
        answer.finish(config, int(session.exitstatus) if session is not None else int(ExitCode.REFUSED), state.session.rows_written, stop)
    if state is None:
        return
    install_session_clock(None)
    for signum, handler in config.stash.get(PREVIOUS_HANDLERS, {}).items():
        signal.signal(signum, handler)
    if state.session.stop:
        sys.stderr.write(f"gpubench: {state.session.stop.line}\n")
    elif state.session.terminated and state.only_build is None:  # under gpubench run, it says so itself
        ended_by = signal.Signals(config.stash.get(ENDED_BY, signal.SIGTERM)).name
        sys.stderr.write(f"gpubench: {ended_by}: {state.session.rows_kept} rows kept in {state.session.csv_path} (each whole); "
                         "the case in progress was not recorded\n")


def end_session_interrupts(config: pytest.Config, session: pytest.Session) -> None:
    """A Ctrl-C held while the session ended makes it interrupted (2) unless a graver status
    stands. pytest run as this process's command holds Ctrl-C until it leaves (exit_process);
    embedded (pytester, pytest.main), Python's handler is given back."""
    import atexit

    ended = HELD_INTERRUPT.pending
    HELD_INTERRUPT.pending = False
    if ended and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.INTERRUPTED
    own_command = list(config.invocation_params.args) == sys.argv[1:] and not config.invocation_params.plugins
    if own_command or HELD_INTERRUPT.owns_process:
        atexit.register(HELD_INTERRUPT.exit_process, int(session.exitstatus))
    else:
        HELD_INTERRUPT.release()


@pytest.hookimpl(tryfirst=True)
def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """Ctrl-C inside torch: a frame there can have no line number (tb_lineno None), and pytest's
    report of the interrupt crashes on it (TypeError, exit 1): such frames are left out."""

    def has_line(entry: Any) -> bool:
        try:
            return entry.lineno is not None
        except TypeError:
            return False

    excinfo.traceback = excinfo.traceback.filter(has_line)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    answer = answer_writer(item.config)
    if answer is not None:
        answer.case_starts()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    """Each phase of a case adds to its cost in the build's answer."""
    report = yield
    answer = answer_writer(item.config)
    if answer is not None:
        answer.case_phase(report)
    return report


def _build_of(item: pytest.Item) -> int:
    return int(getattr(getattr(item, "callspec", None), "params", {}).get("gpubench_build", 0))


@pytest.hookimpl(trylast=True)  # after -k/-m deselection: the build count is the selection's
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Interleave builds: every case's build 0 first, then every case's build 1, ... (stable).
    With --gpubench-build K, only build K of each case runs here (the others are deselected)."""
    state = config.stash.get(STATE, None)
    answer = answer_writer(config)
    if answer is not None:  # tell `gpubench run` how many build processes this selection needs
        answer.collected(max((_build_of(item) + 1 for item in items), default=0))
    if state is not None and state.only_build is not None:
        keep = [item for item in items if _build_of(item) == state.only_build]
        dropped = [item for item in items if _build_of(item) != state.only_build]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = keep
    items.sort(key=_build_of)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Check the results folder only when something will be recorded, still before any case."""
    from harness.records.results import check_writable

    state = session.config.stash.get(STATE, None)
    uses_gpubench = any("gpubench" in getattr(item, "fixturenames", ()) for item in session.items)
    if state is not None and uses_gpubench and not session.config.getoption("collectonly"):
        try:
            check_writable(state.session.results_dir)
        except OSError as error:
            raise pytest.UsageError(str(error)) from None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize (case, build) from the bench module's `gpubench_workload`."""
    declared = getattr(metafunc.module, "gpubench_workload", None)
    if declared is None or "case" not in metafunc.fixturenames:
        return
    workload = as_workload(declared)
    state: RunState = metafunc.config.stash[STATE]
    untimed = bool(getattr(metafunc.config.option, "benchmark_disable", False))
    builds = 1 if untimed else state.ctx.builds_of(workload)  # untimed: each case once
    # the workload's markers ride on each parameter set, so -m "not slow" sees them before any hook
    marks = [getattr(pytest.mark, name) for name in workload.markers]
    params = [pytest.param(case, build, marks=marks, id=case.test_id + (f"-b{build}" if builds > 1 else ""))
              for case in workload.case_list(state.ctx) for build in range(builds)]
    metafunc.parametrize(("case", "gpubench_build"), params)


@pytest.fixture
def gpubench_build() -> int:
    """Which independent build of the case this test measures (parametrized by the plugin)."""
    return 0


@pytest.fixture
def gpubench(benchmark: Any, request: pytest.FixtureRequest, gpubench_build: int) -> Recorder:
    return Recorder(request.config.stash[STATE], benchmark, request, gpubench_build)


def pytest_report_header(config: pytest.Config) -> list[str]:
    """The run's first lines: the device, and a GPU the driver shows but this torch cannot use."""
    from harness.devices.device import unusable_gpu

    state = config.stash.get(STATE, None)
    if state is None:
        return []
    lines = [f"gpubench: device {state.ctx.device}, profile {state.ctx.profile}, results {state.session.csv_path}"]
    unseen = unusable_gpu(state.ctx.device)
    if unseen:
        lines.insert(0, f"gpubench: WARNING: {unseen}")
    if state.ctx.energy.note:  # said once here and in the environment sidecar, never per row
        lines.append(f"gpubench: energy: {state.ctx.energy.note}")
    if state.ctx.telemetry is not None and state.ctx.telemetry.note:  # fields a GPU or VM answers NotSupported
        lines.append(f"gpubench: telemetry: {state.ctx.telemetry.note}")
    return lines


def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    """pytest-benchmark's saved runs carry the device fingerprint, so they can be told apart by GPU."""
    from harness.devices.env import fingerprint

    state = config.stash.get(STATE, None)
    if state is not None:
        machine_info["gpubench"] = dict(state.session.env or fingerprint(state.ctx.device))


def pytest_benchmark_update_json(config: pytest.Config, benchmarks: Any, output_json: dict[str, Any]) -> None:
    """Serializable params: the case's settings instead of 'UNSERIALIZABLE[MatmulCase(...)]'."""
    for bench in output_json.get("benchmarks", []):
        params = bench.get("params") or {}
        case = params.get("case")
        if hasattr(case, "settings"):
            params["case"] = {"workload": case.workload, "case_id": case.case_id, **case.settings()}


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is None:
        return
    if state.untimed_cases:
        terminalreporter.write_line(f"gpubench: --benchmark-disable: {state.untimed_cases} case(s) ran once, untimed; nothing was recorded")
    if not state.session.is_open:
        return
    terminalreporter.write_line(f"gpubench: {state.session.rows_written} rows -> {state.session.csv_path}")
