"""gpubench in fresh processes, for the end-to-end tests: `gpubench run` as a subprocess, pytest
with the plugin over a one-case bench (pytester; the `one_case` fixture in conftest.py), a test
plugin that fills the results folder, and the processes a run may leave behind."""

from __future__ import annotations

import math
import signal
import subprocess
import sys
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
# The command line as a test starts it: this interpreter, gpubench's own module.
GPUBENCH = [sys.executable, "-m", "gpubench.harness.commands.cli"]

# One workload with one case that does nothing: the run's checks before the first case, and how a
# run ends, without the cost of a real workload.
ONE_CASE_BENCH = """
import sys
from dataclasses import dataclass
from typing import ClassVar

from gpubench.harness.measurement.cases import Case
from gpubench.harness.measurement.measure import Timed

gpubench_workload = sys.modules[__name__]


@dataclass(frozen=True)
class TinyCase(Case):
    workload: ClassVar[str] = "matmul"
    size: int


def cases(ctx):
    return [TinyCase(8)]


def set_up(case, ctx):
    return Timed(fn=lambda: None)


def test_tiny(case, gpubench):
    gpubench.run(case)
"""

# A test plugin (loaded with -p fullafter1): the results folder is full once one row is written.
FULL_AFTER_ONE_ROW = '''
"""Test plugin: the results folder is full once one row is written."""
from gpubench.harness.records import results

_append = results.ResultsWriter.append


def append(self, row):
    if self.rows_written >= 1:
        raise results.ResultsFull(self.rows_kept, self.path)
    _append(self, row)


def pytest_configure(config):
    results.ResultsWriter.append = append


def pytest_unconfigure(config):
    # the run may be inside the test's own process: leave the module as it was
    results.ResultsWriter.append = _append
'''


WITH_PLUGIN = ("-p", "gpubench.harness.pytest_plugin.plugin", "-p", "no:cacheprovider")
PLUGIN_OVER_TINY = (
    *WITH_PLUGIN,
    "bench_tiny.py",
    "--benchmark-only",
    "--profile=smoke",
    "--results-dir=out",
)


def run_bench(pytester, *args):
    """pytest with the plugin over the folder's bench_tiny.py (smoke profile, results in out/), in
    this process."""
    return pytest_in_process(pytester, *PLUGIN_OVER_TINY, *args)


def pytest_in_process(pytester, *args, plugins=()):
    """pytester's run inside this process: torch and the harness are imported once, a run costs a
    fraction of a second. The plugin gives back what it took (signal handlers, the session clock,
    torch's flags) as it does for any embedding host; a handler left behind fails the test here."""
    before = stop_signal_handlers()
    result = pytester.runpytest_inprocess(*args, plugins=list(plugins))
    after = stop_signal_handlers()
    # Ctrl-C: Python's own handler back (the plugin's promise to an embedding host), or what it was
    assert after.pop(signal.SIGINT) in (before.pop(signal.SIGINT), signal.default_int_handler), (
        "a run inside this process kept Ctrl-C"
    )
    assert after == before, "a run inside this process left its SIGTERM/SIGHUP handlers behind"
    return result


def run_bench_process(pytester, *args):
    """The same in a fresh pytest process: for a test whose subject is the process (a signal to it,
    its exit)."""
    return pytester.runpytest_subprocess(*PLUGIN_OVER_TINY, *args)


def stop_signal_handlers() -> dict[int, object]:
    return {
        signum: signal.getsignal(signum)
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    }


def one_error_line(result) -> str:
    """The one ERROR: line of a run refused before any case (exit 4, no traceback)."""
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert result.ret == 4 and len(errors) == 1, result.stderr.str()
    assert "Traceback" not in result.stderr.str()
    return errors[0]


def assert_one_full_line(out: str, err: str) -> None:
    """The one results-full line (on stderr, last), and no pytest.exit banner."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(
        "gpubench: results folder full: 1 rows kept in"
    ), err
    assert "results folder full" not in out and not [
        line for line in out.splitlines() if line.startswith("!")
    ], out[-3000:]


def gpubench_run(tmp_path: Path, *args: str, **popen) -> subprocess.Popen[str]:
    """`gpubench run` on the cpu at the smoke profile, results in tmp_path/res, started from the
    repository."""
    return subprocess.Popen(
        [
            *GPUBENCH,
            "run",
            "--device",
            "cpu",
            "--profile",
            "smoke",
            "--results-dir",
            str(tmp_path / "res"),
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        **popen,
    )


def cmdlines(procs: list[psutil.Process]) -> list[str]:
    lines = []
    for proc in procs:
        try:
            lines.append(" ".join(proc.cmdline()))
        except psutil.Error:
            # gone or a zombie meanwhile
            continue
    return lines


BUILD_ENTRY = "gpubench.harness.processes.build_main"
FORK_SERVER = "gpubench.harness.pytest_plugin.fork_server"


def build_processes(pid: int) -> list[psutil.Process]:
    """The build processes under `pid`: plain ones (gpubench.harness.processes.build_main) and the
    fork server's children."""
    try:
        descendants = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    found = []
    for proc in descendants:
        try:
            line, parent = " ".join(proc.cmdline()), proc.parent()
            if BUILD_ENTRY in line or (
                FORK_SERVER in line
                and parent is not None
                and FORK_SERVER in " ".join(parent.cmdline())
            ):
                found.append(proc)
        except psutil.Error:
            # gone meanwhile
            continue
    return found


def processes_of(tmp_path: Path) -> list[psutil.Process]:
    """Live processes started for this test (torchrun and its ranks name tmp_path)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and any(
                str(tmp_path) in arg for arg in proc.info["cmdline"] or ()
            ):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def idx_bytes(dims: tuple[int, ...]) -> bytes:
    header = bytes([0, 0, 0x08, len(dims)]) + b"".join(d.to_bytes(4, "big") for d in dims)
    return header + bytes(math.prod(dims))


def write_idx_folder(
    folder: Path, cut: str | None = None, bad_magic: str | None = None, bad_label: str | None = None
) -> None:
    """Four small, valid IDX files (2 train + 1 test image), one of them damaged on request."""
    folder.mkdir(parents=True)
    for name, dims in (
        ("train-images-idx3-ubyte", (2, 28, 28)),
        ("train-labels-idx1-ubyte", (2,)),
        ("t10k-images-idx3-ubyte", (1, 28, 28)),
        ("t10k-labels-idx1-ubyte", (1,)),
    ):
        data = idx_bytes(dims)
        if name == cut:
            data = data[: len(data) - 100]
        if name == bad_magic:
            data = b"<html>" + data[6:]
        # the last label byte: 200 in a 10-class dataset
        if name == bad_label:
            data = data[:-1] + bytes([200])
        (folder / name).write_bytes(data)


def summary_as_quick(csv_path: Path, out: Path) -> str:
    """The Summary section a smoke run's rows would get as a quick run's: a smoke run's own report
    shows none (its sizes are the suite's test, not figures to compare), so an end-to-end test of a
    summary line relabels them."""
    import csv as csv_module

    from gpubench.reports.render.build import build_report

    with open(csv_path, newline="", encoding="utf-8") as handle:
        header, *rows = list(csv_module.reader(handle))
    for row in rows:
        row[header.index("profile")] = "quick"
    out.mkdir(parents=True)
    relabelled = out / csv_path.name
    with open(relabelled, "w", newline="", encoding="utf-8") as handle:
        csv_module.writer(handle).writerows([header, *rows])
    report = build_report([relabelled], out / "report", baseline=None).read_text(encoding="utf-8")
    return report.split("## Summary\n", 1)[1].split("\n## ", 1)[0]


def run_build_process(plan, cwd: Path, timeout_s: float = 300.0):
    """A build process as gpubench run starts one (build_main, its plan in over one pipe, its answer
    out over another), run to its end: (the process, its last answer or None)."""
    import os

    from gpubench.harness.processes.protocol import last_answer

    plan_read, plan_write = os.pipe()
    answer_read, answer_write = os.pipe()
    # far below a pipe's 64 KiB: no reader needed yet
    os.write(plan_write, plan.to_json().encode())
    os.close(plan_write)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(cwd), str(REPO)]))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpubench.harness.processes.build_main",
            f"--plan-fd={plan_read}",
            f"--answer-fd={answer_write}",
        ],
        cwd=cwd,
        pass_fds=(plan_read, answer_write),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        check=False,
    )
    os.close(plan_read)
    os.close(answer_write)
    with os.fdopen(answer_read, "rb") as pipe:
        return done, last_answer(pipe.read())
