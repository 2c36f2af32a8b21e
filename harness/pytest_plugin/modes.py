"""How the plugin comes to life: loaded by name (the suite) it adds the short options and sets the
run up at configure; through its entry point only `--gpubench-*` options, set up when one is given
or a collected test asks for the `gpubench` fixture. Torch-free until a run is set up."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import pytest

from gpubench.harness.core.console import CONSOLE
from gpubench.harness.core.exits import UsageError
from gpubench.harness.core.options import RUN_OPTIONS, RunOptions, read_run_options
from gpubench.harness.budget.clock import note_run_began
from gpubench.harness.pytest_plugin.build_answer import add_build_options, plan_of, this_build

if TYPE_CHECKING:
    from gpubench.harness.pytest_plugin.run_state import RunState

STATE = pytest.StashKey["RunState"]()
# the pytest11 entry point's name (pyproject.toml): `-p no:gpubench` turns it off
ENTRY_NAME = "gpubench"
ENTRY_MODULE, PLUGIN_MODULE, SUITE_MODULE, OWN_TESTS_MODULE = (
    f"gpubench.harness.pytest_plugin.{name}" for name in ("entry", "plugin", "suite", "own_tests")
)
# what pytest-benchmark times the rounds with
TIMER = "gpubench.harness.measurement.timing.build_clock"


class _OptionNames:
    """A stand-in parser that only records the option names a plugin's pytest_addoption declares."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def getgroup(self, *args: Any, **kwargs: Any) -> _OptionNames:
        return self

    def addoption(self, *names: str, **kwargs: Any) -> None:
        self.names.update(names)

    def addini(self, *args: Any, **kwargs: Any) -> None:
        pass


def taken_flags(pluginmanager: pytest.PytestPluginManager) -> set[str]:
    """Option strings other plugins declare (pytest-profiling has --profile), by calling their
    pytest_addoption on a recording stand-in: pytest has no public list of them."""
    recorder = _OptionNames()
    for plugin in pluginmanager.get_plugins():
        hook = getattr(plugin, "pytest_addoption", None)
        if hook is None or getattr(plugin, "__name__", "").startswith(
            "gpubench.harness.pytest_plugin"
        ):
            continue
        try:
            parameters = inspect.signature(hook).parameters
            hook(
                **{
                    k: v
                    for k, v in (("parser", recorder), ("pluginmanager", pluginmanager))
                    if k in parameters
                }
            )
        # a plugin that cannot declare into a stand-in owns nothing we can see
        except Exception:
            continue
    return recorder.names


def add_options(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """Every option as `--gpubench-*`, which cannot collide; loaded by name (not the entry point,
    nor for the user's own tests, whose conftest may declare `--device`), the short form
    (`--profile`) too unless another plugin has it."""
    # once per pytest configuration, as early as a plugin can: the run's clock starts here
    note_run_began()
    group = parser.getgroup("gpubench")
    loaded = {getattr(plugin, "__name__", None) for plugin in pluginmanager.get_plugins()}
    namespaced_only = ENTRY_MODULE in loaded or OWN_TESTS_MODULE in loaded
    taken = set() if namespaced_only else taken_flags(pluginmanager)
    for option in RUN_OPTIONS:
        short = [] if namespaced_only or option.flag in taken else [option.flag]
        group.addoption(option.namespaced, *short, **option.kwargs(dest=option.pytest_dest))
    add_build_options(group)


def add_suite_options(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """For the suite: the plugin first, then the short forms it left out when its entry point loaded
    it."""
    # no-op when registered; else it declares its options now
    pluginmanager.import_plugin(PLUGIN_MODULE)
    group = parser.getgroup("gpubench")
    declared = {name for argument in group.options for name in argument.names()}
    taken = taken_flags(pluginmanager)
    for option in RUN_OPTIONS:
        if option.flag not in taken and option.flag not in declared:
            group.addoption(option.flag, **option.kwargs(dest=option.pytest_dest))


def is_suite(config: pytest.Config) -> bool:
    """Loaded as the suite's plugin: through the suite module, or by module name before (or without)
    the entry point (pluggy lists plugins in the order they registered)."""
    names = [name for name, plugin in config.pluginmanager.list_name_plugin() if plugin is not None]
    if SUITE_MODULE in names or OWN_TESTS_MODULE in names or ENTRY_NAME not in names:
        return True
    return PLUGIN_MODULE in names and names.index(PLUGIN_MODULE) < names.index(ENTRY_NAME)


def runs_no_test(config: pytest.Config) -> bool:
    """pytest-xdist's controller: it runs no test, so it sets nothing up and never imports torch
    (seconds a session)."""
    distributing = getattr(config.option, "dist", "no") != "no" and not config.getoption(
        "collectonly"
    )
    return distributing and not hasattr(config, "workerinput")


def options_given(config: pytest.Config) -> bool:
    """A build's plan, or a `--gpubench-*` option set to other than its default: the run is
    gpubench's from the start."""
    changed = any(
        config.getoption(option.pytest_dest) not in (None, option.default) for option in RUN_OPTIONS
    )
    return changed or this_build(config) is not None


def activate(config: pytest.Config, name_timer: bool) -> RunState:
    """Validate the options and set the run up (a bad value: one line, exit 4). `name_timer`:
    pytest-benchmark has not configured yet, so the synced clock becomes its --benchmark-timer for
    every test."""
    from gpubench.harness.pytest_plugin.build_setup import make_state

    try:
        plan = plan_of(config)
        state, warning = make_state(
            run_options(config),
            this_build(config),
            getattr(config.option, "benchmark_timer", None),
            extra_build=plan is not None and plan.extra,
            deadline_s=plan.deadline_s if plan is not None else None,
            budget_given=config.getoption("gpubench_budget") is not None,
            collect_only=config.getoption("collectonly"),
            benchmark_json=getattr(config.option, "benchmark_json", None),
            benchmark_min_rounds=getattr(config.option, "benchmark_min_rounds", None),
        )
    except UsageError as error:
        raise pytest.UsageError(str(error)) from None
    if warning:
        CONSOLE.note(f"WARNING: {warning}")
    if name_timer and hasattr(config.option, "benchmark_timer"):
        config.option.benchmark_timer = TIMER
    config.stash[STATE] = state
    return state


def run_options(config: pytest.Config) -> RunOptions:
    """A build's run options as its plan carries them; in a plain pytest run, read once from
    pytest's options."""
    plan = plan_of(config)
    if plan is not None:
        return plan.run
    from gpubench.harness.catalog.profiles import check_profile

    return read_run_options(
        lambda dest: config.getoption("gpubench_" + dest),
        lambda name: check_profile(name).run_budget_s,
    )


def uses_gpubench(item: pytest.Item) -> bool:
    """Whether the test asks for this plugin's `gpubench` fixture (a user's own by that name
    switches nothing on)."""
    if "gpubench" not in getattr(item, "fixturenames", ()):
        return False
    info = getattr(item, "_fixtureinfo", None)
    chosen = info.name2fixturedefs.get("gpubench", ()) if info is not None else ()
    # the closest definition wins
    return bool(chosen) and getattr(chosen[-1].func, "__module__", "") == PLUGIN_MODULE


def activate_for(config: pytest.Config, items: list[pytest.Item]) -> RunState | None:
    """After collection: set the run up if a test asks for the fixture; where the synced clock is
    not the --benchmark-timer, those tests get it through their `benchmark` marker (a timer the test
    names itself stays)."""
    used = [item for item in items if uses_gpubench(item)]
    state = config.stash.get(STATE, None)
    if state is None and used:
        state = activate(config, name_timer=False)
    if state is not None and str(getattr(config.option, "benchmark_timer", "")) != TIMER:
        from gpubench.harness.measurement.timing import build_clock

        for item in used:
            marker = item.get_closest_marker("benchmark")
            if marker is None or "timer" not in marker.kwargs:
                item.add_marker(pytest.mark.benchmark(timer=build_clock))
    return state


def timed_by_build_clock(config: pytest.Config, node: pytest.Item) -> bool:
    """Whether pytest-benchmark times this test with the synced clock (its option or the test's
    marker)."""
    from gpubench.harness.measurement.timing import build_clock

    marker = node.get_closest_marker("benchmark")
    if marker is not None and "timer" in marker.kwargs:
        return marker.kwargs["timer"] is build_clock
    return str(getattr(config.option, "benchmark_timer", "")) == TIMER
