"""gpubench's pytest options and hooks. Loaded by name (the suite) it sets the run up at configure;
installed through its entry point it stays inert (no option changed, no handler, no torch) until a
`--gpubench-*` option is given or a collected test asks for the `gpubench` fixture
(gpubench.harness.pytest_plugin.modes)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from gpubench.harness.core.console import CONSOLE
from gpubench.harness.core.exits import SIGNAL_BASE, ExitCode, StopSignal
from gpubench.harness.processes.cases_file import read_cases_file

# torch-free
from gpubench.harness.processes.lifetime import HELD_INTERRUPT, install_handlers, restore_handlers
from gpubench.harness.pytest_plugin.benchmark_json import add_gpubench_json
from gpubench.harness.pytest_plugin.budget_hooks import (
    cut_at_run_end,
    extra_build_order,
    plan_budget,
    plan_delivery,
    show_plan,
)
from gpubench.harness.pytest_plugin.build_answer import answer_writer, apply_build_options, plan_of
from gpubench.harness.pytest_plugin.compare_fail import (
    check_compare,
    end_session_interrupts,
    histogram_status,
    process_status,
)
from gpubench.harness.pytest_plugin.console import console_of, detach_screen
from gpubench.harness.pytest_plugin.extra_build import (
    build_of,
    builds_to_collect,
    case_id_of,
    deselect,
    keep_in_order,
    params_of,
    selected_builds,
)
from gpubench.harness.pytest_plugin.modes import (
    STATE,
    activate,
    activate_for,
    add_options,
    is_suite,
    options_given,
    runs_no_test,
    timed_by_build_clock,
    uses_gpubench,
)

# imported where the plugin is set up: an unrelated test run never loads torch through it
if TYPE_CHECKING:
    from gpubench.harness.pytest_plugin.fixture import Recorder
    from gpubench.harness.pytest_plugin.run_state import RunState

SESSION = pytest.StashKey[pytest.Session]()
# Signals that stop the run with the case in progress unwound (its DDP workdir removed) and the
# session closed (the environment sidecar written): SIGTERM (a scheduler) and SIGHUP (the terminal
# closed). The exit status is 128 + the first one's number, as a shell reports a process it ended.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
ENDED_BY = pytest.StashKey[int]()
PREVIOUS_HANDLERS = pytest.StashKey[dict[int, Any]]()
# files pytest could not collect (a syntax error in a user's test file)
COLLECTION_ERRORS = pytest.StashKey[int]()
SUITE_BENCHES = Path(__file__).resolve().parents[2] / "benches"
# the `--model` workload's bench module there
MODEL_BENCH = "bench_model.py"
MARKERS = {
    "slow": "long cases: training epochs, distributed runs (deselect with -m 'not slow')",
    "training": "cases that train a model",
    "distributed": "cases that start several processes (DDP, DataParallel)",
    "gpu": "cases that need an accelerator (skipped rows on a CPU-only machine)",
}


# after the other plugins: the suite's short forms skip the options they own
@pytest.hookimpl(trylast=True)
def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    add_options(parser, pluginmanager)


# before pytest-benchmark's own configure, which loads the timer
@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """The suite, or a run given a --gpubench-* option: validate everything before the first case
    (one line, exit 4)."""
    # a bad option is one line here, not one per worker
    if runs_no_test(config) and not options_given(config):
        return
    if is_suite(config):
        hold_interrupts_while_loading()
        for name, text in MARKERS.items():
            config.addinivalue_line("markers", f"{name}: {text}")
    if is_suite(config) or options_given(config):
        # before pytest-benchmark's session start reads it
        check_compare(config)
        # a build of `gpubench run`: its view of the user's output files and selection
        apply_build_options(config)
        from gpubench.harness.pytest_plugin.console import attach_screen, install

        attach_screen(config)
        # before pytest's terminal reporter reads the verbosity
        install(config)
        activate(config, name_timer=True)


def hold_interrupts_while_loading() -> None:
    """The suite loads torch here with Ctrl-C held, then raised as an interrupt of the session (exit
    2)."""
    HELD_INTERRUPT.hold()
    import gpubench.harness.pytest_plugin.fixture  # noqa: F401 - torch and the harness, while Ctrl-C is held

    # Ctrl-C while pytest loaded the plugins: exit 2 (later ones stay held)
    if HELD_INTERRUPT.pending:
        HELD_INTERRUPT.pending = False
        raise KeyboardInterrupt
    HELD_INTERRUPT.release(then=HELD_INTERRUPT.raise_once)


def pytest_sessionstart(session: pytest.Session) -> None:
    """SIGTERM and SIGHUP become an interrupt that lets the case in progress clean up."""
    # its exit status, set again at unconfigure for a held Ctrl-C
    session.config.stash[SESSION] = session
    state = session.config.stash.get(STATE, None)
    if state is not None:
        catch_stop_signals(session, state)


def catch_stop_signals(session: pytest.Session, state: RunState) -> None:
    """From the run's set-up on (the session's start, or after collection), until unconfigure; a
    signal the parent set to be ignored stays ignored."""

    def terminate(signum: int, frame: Any) -> None:
        # a second one (the group's, then gpubench run's) must not cut the cleanup short
        if state.records.terminated:
            return
        state.records.terminated = True
        session.config.stash[ENDED_BY] = signum
        raise StopSignal(
            signum, "the case in progress was not recorded; the finished rows are whole"
        )

    # nohup's SIGHUP stays ignored: the run outlives its terminal
    try:
        session.config.stash[PREVIOUS_HANDLERS] = install_handlers(terminate, STOP_SIGNALS)
    # not the main thread (pytest embedded somewhere): keep the default
    except ValueError:
        pass


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """After the results folder filled up, or SIGTERM, the remaining cases neither run nor report:
    one line ends the run instead of pytest's interrupt banner."""
    state = item.config.stash.get(STATE, None)
    return True if state is not None and (state.records.stop or state.records.terminated) else None


# outermost: before pytest-benchmark writes its files
@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> Any:
    """Close the records before the exit status is decided (a sidecar the disk refused is lost data:
    exit 75); from here to unconfigure the suite holds Ctrl-C."""
    if is_suite(session.config):
        HELD_INTERRUPT.hold()
    close_session(session)
    # --benchmark-histogram without pygal
    return (yield from histogram_status(session))


# outermost: what pytest.main returns, or the exception leaving it
@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> Any:
    """The suite's process leaves with pytest's own status (compare_fail.process_status)."""
    return (yield from process_status(config))


def close_session(session: pytest.Session) -> None:
    state = session.config.stash.get(STATE, None)
    if state is None:
        return
    from gpubench.harness.measurement.run_records import RunStop
    from gpubench.harness.records.results import ResultsFull

    errors = session.config.stash.get(COLLECTION_ERRORS, 0)
    # pytest calls collection errors "interrupted": not a Ctrl-C
    if errors and session.exitstatus == pytest.ExitCode.INTERRUPTED and not state.records.stop:
        state.records.stop = RunStop(
            f"{errors} test file(s) could not be collected (pytest's error above): "
            "fix them, then run again",
            ExitCode.REFUSED,
        )

    if state.records.is_open:
        try:
            state.records.close()
        except ResultsFull as full:
            state.records.stop = state.records.stop or RunStop(str(full), ExitCode.RESULTS_FULL)
    if state.records.terminated:
        session.exitstatus = SIGNAL_BASE + session.config.stash.get(ENDED_BY, signal.SIGTERM)
    elif state.records.stop:
        # results full (75), run id taken (4): no further build starts
        session.exitstatus = state.records.stop.code


def pytest_unconfigure(config: pytest.Config) -> None:
    """The stop line comes last, after pytest's summary, where it is seen."""
    detach_screen(config)
    session = config.stash.get(SESSION, None)
    if is_suite(config) and session is not None:
        end_session_interrupts(config, session)
    # ended before its session (a usage error): Python's handler back for an embedding host
    elif is_suite(config):
        HELD_INTERRUPT.release()
    state = config.stash.get(STATE, None)
    answer = answer_writer(config)
    if answer is not None and state is not None:
        stop = [state.records.stop.line] if state.records.stop else []
        code = int(session.exitstatus) if session is not None else int(ExitCode.REFUSED)
        answer.finish(config, code, state.records.rows_written, stop)
    if state is None:
        return
    from gpubench.harness.measurement.timing import install_build_clock

    # an embedding run's own (pytester in a gpubench session)
    install_build_clock(state.previous_clock)
    # torch's threads back as the embedding process had them
    if state.threads_moved is not None:
        import torch

        torch.set_num_threads(state.threads_moved[0])
    restore_handlers(config.stash.get(PREVIOUS_HANDLERS, {}))
    if state.records.stop:
        CONSOLE.note(state.records.stop.line)
    # under gpubench run, it says so itself
    elif state.records.terminated and state.only_build is None:
        ended_by = signal.Signals(config.stash.get(ENDED_BY, signal.SIGTERM)).name
        CONSOLE.note(
            f"{ended_by}: {state.records.rows_kept} rows kept in {state.records.csv_path} "
            "(each whole); the case in progress was not recorded"
        )


@pytest.hookimpl(tryfirst=True)
def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """Ctrl-C inside torch: a frame there can have no line number, and pytest's report of the
    interrupt crashes on it (TypeError, exit 1): such frames are left out."""

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
        answer.case_starts(item.nodeid)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    # past the run's end and its grace: cut
    with cut_at_run_end(item.config.stash.get(STATE, None), item.nodeid):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    """Each phase of a case adds to its cost in the build's answer."""
    report = yield
    answer = answer_writer(item.config)
    if answer is not None:
        answer.case_phase(report)
    return report


def _only_cases(config: pytest.Config, items: list[pytest.Item], state: RunState | None) -> None:
    """With a cases file in the plan (gpubench ab) only its cases run here; a line `CASE SECONDS`
    also sets that case's build time."""
    plan = plan_of(config)
    path = plan.cases if plan is not None else ""
    if not path:
        return
    try:
        seconds = read_cases_file(Path(path))
    except (OSError, ValueError) as error:
        raise pytest.UsageError(
            f"the cases file {path}: {getattr(error, 'strerror', None) or error} — "
            "gpubench ab writes this file itself"
        ) from None
    wanted = set(seconds)
    if state is not None:
        state.ctx.case_build_s = {case: s for case, s in seconds.items() if s is not None}
    # a test with no case parameter (a user's own, timing through gpubench.measure) cannot be
    # narrowed: kept
    deselect(
        config,
        items,
        lambda item: (
            (case := params_of(item).get("case")) is None
            or getattr(case, "case_id", None) in wanted
        ),
    )


# after -k/-m deselection: the build count is the selection's
@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Interleave builds: every case's build 0 first (headline cases first), then build 1, ...; with
    --gpubench-build K only build K runs here. Installed and not set up yet: set up now if a test
    asks for the `gpubench` fixture."""
    was_set_up = config.stash.get(STATE, None) is not None
    state = activate_for(config, items)
    session = config.stash.get(SESSION, None)
    if state is not None and not was_set_up and session is not None:
        catch_stop_signals(session, state)
    _only_cases(config, items, state)
    answer = answer_writer(config)
    # tell `gpubench run` how many build processes this selection needs
    if answer is not None:
        answer.collected(
            max(
                (selected_builds(state.case_builds if state else {}, item) for item in items),
                default=0,
            )
        )
    if state is not None and state.extra_build:
        keep_in_order(config, items, extra_build_order(state))
    # value first: within a build, the report summary's cases run before the settings tables
    elif state is not None:
        items.sort(key=lambda item: (build_of(item), case_id_of(item) not in state.headline))
    if state is not None and any(map(uses_gpubench, items)):
        from gpubench.harness.pytest_plugin.machine_look import take_look

        # before the plan's probe: it prices the cases with the threads they will have
        take_look(state)
    if state is not None and state.budget_s is not None:
        state.budget_plan = plan_budget(state, items)
    if state is not None and state.only_build is not None:
        # a user's own test (no case parameter: its builds are gpubench.measure's) runs in every
        # build process
        deselect(
            config,
            items,
            lambda item: build_of(item) == state.only_build or case_id_of(item) is None,
        )


def pytest_collection_finish(session: pytest.Session) -> None:
    """Check the results folder when something will be recorded, then show the budget's plan; count
    the collection errors here, before any test: pytest then stops the session as "interrupted",
    which is no Ctrl-C."""
    session.config.stash[COLLECTION_ERRORS] = session.testsfailed
    state = session.config.stash.get(STATE, None)
    if (
        state is not None
        and any(map(uses_gpubench, session.items))
        and not session.config.getoption("collectonly")
    ):
        from gpubench.harness.records.results import check_writable

        try:
            check_writable(state.records.results_dir)
        except OSError as error:
            raise pytest.UsageError(str(error)) from None
        from gpubench.harness.pytest_plugin.machine_look import show_look

        show_look(session.config, state)
        if state.budget_plan is not None:
            show_plan(session.config, state.budget_plan)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The suite's bench modules and the `--model` one exclude each other: --model times that model
    alone."""
    state = config.stash.get(STATE, None)
    if (
        state is None
        or not collection_path.name.startswith("bench_")
        or collection_path.parent.resolve() != SUITE_BENCHES
    ):
        return None
    return True if (collection_path.name == MODEL_BENCH) != (state.ctx.model is not None) else None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    declared = getattr(metafunc.module, "gpubench_workload", None)
    if declared is None or "case" not in metafunc.fixturenames:
        return
    from gpubench.harness.measurement.workload import as_workload

    workload = as_workload(declared)
    # installed: a bench module
    state = metafunc.config.stash.get(STATE, None) or activate(metafunc.config, name_timer=False)
    untimed = bool(getattr(metafunc.config.option, "benchmark_disable", False))
    # untimed: each case once
    builds = 1 if untimed else state.ctx.builds_of(workload)
    numbers = builds_to_collect(builds, state.only_build, state.extra_build)
    # the workload's markers ride on each parameter set, so -m "not slow" sees them before any hook
    marks = [getattr(pytest.mark, name) for name in workload.spec.markers]
    cases = list(workload.cases(state.ctx))
    state.case_builds.update((case.case_id, builds) for case in cases)
    state.headline.update(case.case_id for case in workload.headline(cases))
    params = [
        pytest.param(
            case, build, marks=marks, id=case.test_id + (f"-b{build}" if builds > 1 else "")
        )
        for case in cases
        for build in numbers
    ]
    metafunc.parametrize(("case", "gpubench_build"), params)


@pytest.fixture
def gpubench_build() -> int:
    """Which independent build of the case this test measures (parametrized by the plugin)."""
    return 0


@pytest.fixture
def gpubench(benchmark: Any, request: pytest.FixtureRequest, gpubench_build: int) -> Recorder:
    """The harness for one test: `gpubench.run(case)` in a bench module, `gpubench.measure(fn,
    name=...)` elsewhere."""
    from gpubench.harness.pytest_plugin.fixture import Recorder

    # asked for by name at run time
    state = request.config.stash.get(STATE, None) or activate(request.config, name_timer=False)
    return Recorder(
        state,
        benchmark,
        request,
        gpubench_build,
        benchmark_times=timed_by_build_clock(request.config, request.node),
    )


def pytest_report_header(config: pytest.Config) -> list[str]:
    """The run's first lines: the device, and a GPU the driver shows but this torch cannot use."""
    state = config.stash.get(STATE, None)
    if state is None:
        return []
    from gpubench.harness.pytest_plugin.console import header_lines

    return header_lines(state)


# pytest-benchmark's hook: unknown, and fine, where it is not loaded
@pytest.hookimpl(optionalhook=True)
def pytest_benchmark_update_json(
    config: pytest.Config, benchmarks: Any, output_json: dict[str, Any]
) -> None:
    """Serializable params and the device fingerprint under the file's own `gpubench` key: not in
    `machine_info`, which --benchmark-compare checks against its own from configure and warned on
    every compare."""
    state = config.stash.get(STATE, None)
    if state is not None:
        add_gpubench_json(state, output_json)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is None:
        return
    if state.untimed_cases:
        CONSOLE.say(
            f"--benchmark-disable: {state.untimed_cases} case(s) ran once, untimed; "
            "nothing was recorded"
        )
    # the compact console ends the build itself
    if not state.records.is_open or console_of(config) is not None:
        return
    CONSOLE.say(f"{state.records.rows_written} rows -> {state.records.csv_path}")
    # gpubench run says it once, for all its builds
    if state.budget_plan is not None and state.only_build is None:
        for line in plan_delivery(state.budget_plan, state.records.csv_path):
            CONSOLE.show(line)
