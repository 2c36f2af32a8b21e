"""What a person sees of a build process of `gpubench run` or `gpubench ab` when they asked for no
verbosity: the run's first lines once, one line per case of the first build (the figure, its flags,
the budget left), a live line rewritten in place on a terminal for everything else, skipped cases
counted by reason, and one line at the build's end. pytest's own per-test output is turned down to
its failures; `-v` gives it back whole."""

from __future__ import annotations

import re
import shutil
import time
from collections import Counter
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from gpubench.harness.core.console import CONSOLE, Screen, StandardStreams
from gpubench.harness.measurement.terminal import short_line
from gpubench.harness.pytest_plugin.build_answer import plan_of
from gpubench.harness.pytest_plugin.modes import STATE

if TYPE_CHECKING:
    from gpubench.harness.pytest_plugin.run_state import RunState

BUILD_CONSOLE = pytest.StashKey["Console"]()
PREVIOUS_SCREEN = pytest.StashKey[Screen]()
# off a terminal, a long case says how far it is this often (a log grows slowly)
PLAIN_PROGRESS_EVERY_S = 30.0
# case ids named beside a skip reason; the rest are counted
SHOWN_CASES = 3
# a skip reason is cut to this on the console; its row keeps it whole
SKIP_LINE_CHARS = 160
# 12, 0.5, 1m41s, 12 s, 256MiB
NUMBER = re.compile(r"\d[\w.]*(?: s\b)?")
BUILD_SUFFIX = re.compile(r"-b\d+$")


def install(config: pytest.Config) -> None:
    """In a build process of a run (it answers to `gpubench run`/`ab`) whose user asked for no
    verbosity, at configure, before pytest's terminal reporter reads its verbosity: pytest at -qq
    (no header, no progress letters, no stats line) and this console registered to say the rest."""
    plan = plan_of(config)
    if plan is None or config.option.verbose > 0:
        return
    # -q (gpubench ab's builds): a later build ends without a line
    quiet = config.option.verbose < 0
    config.option.verbose = -2
    console = Console(config, first_build=plan.build == 0 and not plan.extra, quiet=quiet)
    config.stash[BUILD_CONSOLE] = console
    config.pluginmanager.register(console, "gpubench-console")


class ReporterScreen:
    """pytest's terminal reporter as the one console's screen, pytest's capture lifted while a line
    is written (so a line written during a test reaches the terminal); without a reporter, standard
    output."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.live_shown = False

    def line(self, text: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            StandardStreams().line(text)
            return
        with uncaptured(self.config):
            if self.live_shown:
                # The live line is wiped, then this one takes its place.
                reporter._tw.write("\r" + " " * (terminal_columns() - 1) + "\r")
                self.live_shown = False
            reporter.write_line(text)

    def live(self, text: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or not getattr(reporter, "isatty", False):
            self.line(text)
            return
        # One row: a longer line would wrap and never be rewritten.
        width = terminal_columns() - 1
        shown = text[:width]
        with uncaptured(self.config):
            reporter._tw.write("\r" + shown.ljust(width if self.live_shown else len(shown)))
        self.live_shown = True


def attach_screen(config: pytest.Config) -> None:
    """From configure to unconfigure, the console's lines land on pytest's terminal."""
    config.stash[PREVIOUS_SCREEN] = CONSOLE.screen
    CONSOLE.attach(ReporterScreen(config))


def detach_screen(config: pytest.Config) -> None:
    """The screen the console had before this session (an embedding session's own, under
    pytester)."""
    if PREVIOUS_SCREEN in config.stash:
        CONSOLE.attach(config.stash[PREVIOUS_SCREEN])


def console_of(config: pytest.Config) -> Console | None:
    return config.stash.get(BUILD_CONSOLE, None)


def uncaptured(config: pytest.Config) -> AbstractContextManager[Any]:
    """pytest's capture lifted, so that a line written during a test reaches the terminal."""
    capture = config.pluginmanager.get_plugin("capturemanager")
    return capture.global_and_fixture_disabled() if capture is not None else nullcontext()


def terminal_columns() -> int:
    """The terminal's width as it is now (pytest's writer reads it once, and takes any width under
    40 for 80)."""
    return max(2, shutil.get_terminal_size().columns)


def header_lines(state: RunState) -> list[str]:
    """The run's first lines: the device, and a GPU the driver shows but this torch cannot use."""
    from gpubench.harness.devices.device import unusable_gpu

    lines = [
        f"gpubench: device {state.ctx.device}, profile {state.ctx.profile}, results "
        f"{state.records.csv_path}"
    ]
    if unseen := unusable_gpu(state.ctx.device):
        lines.insert(0, f"gpubench: WARNING: {unseen}")
    # said once here and in the environment sidecar, never per row
    if state.ctx.energy.note:
        lines.append(f"gpubench: energy: {state.ctx.energy.note}")
    # fields a GPU or VM answers NotSupported
    if state.ctx.telemetry is not None and state.ctx.telemetry.note:
        lines.append(f"gpubench: telemetry: {state.ctx.telemetry.note}")
    return lines


def build_label(state: RunState) -> str:
    """`build 2 of 3`, `extra build 4`, or `build` for a run of one."""
    build = state.only_build or 0
    if state.extra_build:
        return f"extra build {build + 1}"
    # a user's gpubench.measure() says its count when it runs
    builds = max(state.case_builds.values(), default=1)
    if builds > 1:
        return f"build {build + 1} of {builds}"
    return f"build {build + 1}" if build else "build"


def case_name(nodeid: str) -> str:
    """`matmul/tf32-n2048` from `benches/bench_matmul.py::test_matmul[tf32-n2048-b0]`; a user's test
    by its name."""
    path, _, test = nodeid.partition("::")
    name, _, param = test.partition("[")
    module = Path(path).stem
    if not (param and module.startswith("bench_")):
        return test or nodeid
    return f"{module.removeprefix('bench_')}/{BUILD_SUFFIX.sub('', param.rstrip(']'))}"


def steps_text(case_id: str, done: int, total: int, spent_s: float) -> str:
    """How far a long case is: its steps done of the total (0: unknown) and when it should end."""
    if not total:
        return f"{case_id}: {done} steps, {spent_s:.0f} s"
    return (
        f"{case_id}: {done}/{total} steps ({done / total:.0%}), ETA "
        f"{spent_s / done * (total - done):.0f} s"
    )


def word_cut(text: str, chars: int) -> str:
    """`text` in at most `chars` characters, cut after a whole word; a word that would leave less
    than half the room (a path, a long name) is cut inside."""
    if len(text) <= chars:
        return text
    head = text[: chars - 1]
    space = head.rfind(" ")
    return (head[:space].rstrip(" ,:;(") if space >= len(head) // 2 else head) + "…"


def shortened(text: str, tail: str) -> str:
    """`text` cut after a word so that the line with its `tail` fits SKIP_LINE_CHARS; a tail that
    would leave the text less than half the line is cut first (the CSV and the report keep both
    whole)."""
    tail = word_cut(tail, SKIP_LINE_CHARS // 2) + (")" if len(tail) > SKIP_LINE_CHARS // 2 else "")
    return word_cut(text, SKIP_LINE_CHARS - len(tail)) + tail


def reason_key(reason: str) -> str:
    """Skip reasons that differ only in their numbers (one call's seconds, a size) are one
    reason."""
    return NUMBER.sub("#", reason)


# registered as a pytest plugin: pytest 8.0 hashes it
@dataclass(eq=False)
class Console:
    config: pytest.Config
    first_build: bool
    # a later build says nothing unless something failed: the run's own line speaks for it
    quiet: bool = False
    measured: int = 0
    # of the cases measured
    flags: Counter[str] = field(default_factory=Counter)
    failed: int = 0
    # reason key -> case ids
    skipped: dict[str, list[str]] = field(default_factory=dict)
    # reason key -> the first reason as said
    reasons: dict[str, str] = field(default_factory=dict)
    _last_plain_s: float = 0.0

    @property
    def reporter(self) -> Any:
        return self.config.pluginmanager.get_plugin("terminalreporter")

    @property
    def on_terminal(self) -> bool:
        reporter = self.reporter
        return bool(reporter is not None and getattr(reporter, "isatty", False))

    def say(self, text: str, live: bool = False) -> None:
        """A line that stays, or the live one (a terminal only)."""
        if self.reporter is None:
            return
        if live:
            CONSOLE.live(text)
        else:
            CONSOLE.show(text)

    def case_done(self, row: dict[str, Any], budget: str | None) -> None:
        """A measured case: a line that stays in the first build (its figure is the run's first word
        on it), the live line in a later one (its figures fold into the report). Other outcomes are
        counted by their reason."""
        if row.get("status") != "ok":
            return
        self.flags.update(flag for flag in str(row.get("flags") or "").split(";") if flag)
        line = f"  {short_line(row)}" + (f"  [{budget}]" if budget else "")
        if self.first_build:
            self.say(line)
        elif self.on_terminal:
            self.say(line, live=True)

    def step_progress(self, case_id: str) -> Any:
        """A long case's steps: the live line on a terminal, else a line every
        PLAIN_PROGRESS_EVERY_S."""
        start_s = time.monotonic()
        self._last_plain_s = start_s

        def report(done: int, total: int) -> None:
            now_s = time.monotonic()
            text = "  " + steps_text(case_id, done, total, now_s - start_s)
            if self.on_terminal:
                self.say(text, live=True)
            elif now_s - self._last_plain_s >= PLAIN_PROGRESS_EVERY_S:
                self._last_plain_s = now_s
                self.say(text)

        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport) -> tuple[str, str, str] | None:
        """No progress letter for a case that passed or was skipped (its line, or its count, says
        it)."""
        if report.passed and report.when == "call":
            return "passed", "", "PASSED"
        if report.skipped:
            return "skipped", "", "SKIPPED"
        return None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" and report.passed:
            self.measured += 1
        elif report.failed:
            self.failed += 1
        elif report.skipped and isinstance(report.longrepr, tuple):
            reason = str(report.longrepr[2]).removeprefix("Skipped: ")
            key = reason_key(reason)
            self.reasons.setdefault(key, reason)
            self.skipped.setdefault(key, []).append(case_name(report.nodeid))

    # before the look and the plan: the run's first lines come first
    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        state = self.config.stash.get(STATE, None)
        if self.first_build and state is not None and session.items:
            for line in header_lines(state):
                self.say(line)

    def pytest_terminal_summary(self) -> None:
        """The build's end: the first build's skipped cases by reason, then one line."""
        state = self.config.stash.get(STATE, None)
        if state is None or not (self.measured or self.skipped or self.failed):
            return
        if self.first_build:
            for line in self.skipped_lines():
                self.say(line)
        elif self.quiet and not self.failed:
            return
        plan = state.budget_plan
        self.say(
            self.end_line(
                build_label(state),
                state.records.rows_written,
                f"budget {plan.time_left()}" if plan is not None else None,
                state.untimed_cases > 0,
            )
        )

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        """pytest's reporter opens its summary with an empty line: one per build process, in a run
        of dozens. The next empty line its writer is asked for is left out (its writer is private:
        without it, nothing changes)."""
        writer = getattr(self.reporter, "_tw", None)
        if writer is None:
            return
        line = writer.line

        def once(text: str = "", **markup: Any) -> None:
            # the class's own method again
            del writer.line
            if text:
                line(text, **markup)

        writer.line = once

    def skipped_lines(self) -> list[str]:
        """One line per reason: how many, the reason, the first few cases."""
        lines = []
        for key, cases in sorted(self.skipped.items(), key=lambda item: -len(item[1])):
            more = f" +{len(cases) - SHOWN_CASES}" if len(cases) > SHOWN_CASES else ""
            named = ", ".join(cases[:SHOWN_CASES]) + more
            lines.append(shortened(f"  skipped {len(cases)}: {self.reasons[key]}", f" ({named})"))
        return lines

    def end_line(self, build: str, rows: int, budget: str | None, untimed: bool = False) -> str:
        skipped = sum(map(len, self.skipped.values()))
        flagged = (
            f" ({', '.join(f'{n} {flag}' for flag, n in self.flags.most_common())})"
            if self.flags
            else ""
        )
        done = "ran once, untimed (--benchmark-disable)" if untimed else "measured"
        parts = [f"{self.measured} case(s) {done}{flagged}"] + (
            [f"{skipped} skipped"] if skipped else []
        )
        parts += [f"{self.failed} failed"] if self.failed else []
        left = f"; {budget}" if budget else ""
        return f"gpubench: {build}: {', '.join(parts)}; {rows} rows written{left}"
