"""The console of a run's build process (gpubench.harness.pytest_plugin.console) and a run's
closing lines (gpubench.reports.render.console), without starting a process:
tests/test_run_processes.py runs the whole story."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from gpubench.harness.core.console import CONSOLE
from gpubench.harness.pytest_plugin.console import (
    SKIP_LINE_CHARS,
    Console,
    build_label,
    case_name,
    reason_key,
)
from gpubench.reports.render.console import console_text, figure_lines


class Writer:
    fullwidth = 40

    def __init__(self) -> None:
        self.out = ""

    def write(self, text: str, **markup: object) -> None:
        self.out += text

    def line(self, text: str = "", **markup: object) -> None:
        self.out += text + "\n"


class Reporter:
    def __init__(self, isatty: bool) -> None:
        self.isatty, self._tw = isatty, Writer()

    def write_line(self, text: str) -> None:
        self._tw.line(text)


class Plugins:
    def __init__(self, reporter: Reporter) -> None:
        self.reporter = reporter

    def get_plugin(self, name: str) -> object:
        return self.reporter if name == "terminalreporter" else None


def console(isatty: bool, first_build: bool) -> Console:
    return Console(
        SimpleNamespace(pluginmanager=Plugins(Reporter(isatty))), first_build=first_build
    )


ROW = {
    "status": "ok",
    "case_id": "matmul/fp32-n512",
    "workload": "matmul",
    "median_s": 0.00274,
    "tflops": 0.0978,
    "flags": "noisy",
}


def test_the_first_build_keeps_a_line_per_case_and_a_later_one_only_a_live_line_on_a_terminal(
    monkeypatch,
):
    from gpubench.harness.pytest_plugin import console as module

    # the window as it is now
    monkeypatch.setattr(module, "terminal_columns", lambda: Writer.fullwidth)
    first, later, logged = console(True, True), console(True, False), console(False, False)
    screens = {id(each): module.ReporterScreen(each.config) for each in (first, later, logged)}
    for each in (first, later, logged):
        CONSOLE.attach(screens[id(each)])
        each.case_done(ROW, "26 s left")
    assert (
        first.reporter._tw.out
        == "  matmul/fp32-n512: 2.74 ms [noisy]; 0.0978 TFLOP/s  [26 s left]\n"
    )
    assert (
        later.reporter._tw.out.startswith("\r  matmul/fp32-n512")
        and "\n" not in later.reporter._tw.out
    )
    # one row of the terminal, rewritten in place
    assert len(later.reporter._tw.out) <= Writer.fullwidth
    # a log gets no line per case of a later build
    assert logged.reporter._tw.out == ""
    CONSOLE.attach(screens[id(later)])
    # a line that stays wipes the live one first
    later.say("gpubench: plan corrected")
    assert later.reporter._tw.out.endswith(
        "\r" + " " * (Writer.fullwidth - 1) + "\rgpubench: plan corrected\n"
    )
    assert first.flags == {"noisy": 1}


def test_skips_are_counted_by_reason_numbers_aside():
    assert reason_key("one call takes 1m41s (x0.5)") == reason_key("one call takes 12 s (x2)")
    shown = console(False, True)
    shown.skipped = {"a": ["m/1", "m/2", "m/3", "m/4", "m/5"], "b": ["t/1"]}
    shown.reasons = {"a": "needs a GPU", "b": "tf32 on cpu"}
    assert shown.skipped_lines() == [
        "  skipped 5: needs a GPU (m/1, m/2, m/3 +2)",
        "  skipped 1: tf32 on cpu (t/1)",
    ]
    shown.skipped["c"], shown.reasons["c"] = ["a/1"], "x" * 300
    assert (
        shown.skipped_lines()[-1].endswith("x… (a/1)")
        and len(shown.skipped_lines()[-1]) == SKIP_LINE_CHARS
    )
    del shown.skipped["c"]
    shown.measured = 3
    assert shown.end_line("build 1 of 3", 9, "budget 1m left") == (
        "gpubench: build 1 of 3: 3 case(s) measured, 6 skipped; 9 rows written; budget 1m left"
    )
    assert shown.end_line("build", 0, None, untimed=True) == (
        "gpubench: build: 3 case(s) ran once, untimed (--benchmark-disable), 6 skipped; 0 rows "
        "written"
    )


def test_case_names_and_build_labels():
    assert case_name("benches/bench_matmul.py::test_matmul[tf32-n2048-b0]") == "matmul/tf32-n2048"
    assert case_name("tests/test_mine.py::test_step") == "test_step"
    state = SimpleNamespace(only_build=1, extra_build=False, case_builds={"a": 3, "b": 1})
    assert build_label(state) == "build 2 of 3"
    assert (
        build_label(SimpleNamespace(only_build=4, extra_build=True, case_builds={}))
        == "extra build 5"
    )


def test_the_closing_lines_say_the_summary_as_plain_text():
    assert console_text(r"**Answer:** on **vm**, `preloaded\-raced`: 64 ids&lt;1024") == (
        "Answer: on vm, preloaded-raced: 64 ids<1024"
    )
    table = pd.DataFrame(
        {"vm": ["baseline", "0.195 TFLOP/s ±1%", ""]},
        index=pd.Index(["speed vs baseline", "matmul fp32, best", "empty"], name="figure"),
    )
    assert figure_lines(table) == ["  matmul fp32, best  0.195 TFLOP/s ±1%"]


def test_a_sessions_progress_line_is_said_when_it_changes_or_every_half_minute(monkeypatch, capsys):
    from gpubench.harness.commands import common

    clock = iter([0.0, 1.0, 2.0, 31.0, 32.0])
    monkeypatch.setattr(common.time, "monotonic", lambda: next(clock))
    line = common.ThrottledLine()
    said = [
        ("pair 1", False),
        ("pair 2", False),
        ("pair 3", True),
        ("pair 4", False),
        ("pair 5", False),
    ]
    for text, changed in said:
        line.say(text, changed)
    # 5: 30 s after 3
    assert capsys.readouterr().out.splitlines() == [
        "gpubench: pair 1",
        "gpubench: pair 3",
        "gpubench: pair 5",
    ]


def test_paths_in_the_closing_lines_are_one_pasteable_shell_word():
    from pathlib import Path

    from gpubench.reports.render.console import shell_word

    assert shell_word(Path("/tmp/a b/x.csv")) == "'/tmp/a b/x.csv'"
    # one line, as bash reads it back
    assert shell_word(Path("/tmp/a\nb/x.csv")) == "$'/tmp/a\\nb/x.csv'"
    assert shell_word(Path("/tmp/plain.csv")) == "/tmp/plain.csv"
