"""Ctrl-C to plain `pytest benches` exits 2 wherever it lands: while the plugin and torch import,
during the case, while pytest-benchmark writes and the summary prints, and while the process
leaves (Python resets its handlers then, and torch's teardown took seconds: exit -2)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runs import REPO, build_processes

STAGGER_S = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.3]


def torch_loaded(pid: int) -> bool:
    """torch's library is mapped: the plugin, which holds Ctrl-C from its import on, is loading.
    (Before pytest reads the conftest nothing of gpubench runs: Python's own Ctrl-C applies.)"""
    try:
        return "libtorch" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def leaving(pid: int) -> bool:
    """The process has called exit: a zombie, or the kernel still unmapping torch's memory (PF_EXITING,
    tens of ms) — its status is decided and no handler runs any more (a Ctrl-C then is not one to it)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return True
    return fields[0] in ("Z", "X") or bool(int(fields[6]) & 0x4)  # state; flags & PF_EXITING


def interrupted_run(tmp_path: Path, delay_s: float) -> tuple[bool, int, str]:
    """(alive when Ctrl-C came, exit code, output) of one tiny run sent SIGINT `delay_s` after torch loads."""
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "benches", "--benchmark-only", "-p", "no:cacheprovider",
                             "--profile=smoke", "--device=cpu", f"--results-dir={tmp_path}", "-k", "matmul and fp32"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 30
    while proc.poll() is None and not torch_loaded(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(delay_s)
    alive = proc.poll() is None and not leaving(proc.pid)
    if alive:
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole foreground group
    out, _ = proc.communicate(timeout=60)
    return alive, proc.returncode, out


@pytest.mark.process
def test_ctrl_c_at_any_moment_of_a_plain_pytest_run_exits_2(tmp_path):
    outcomes = [interrupted_run(tmp_path / str(i), delay_s) for i, delay_s in enumerate(STAGGER_S)]
    interrupted = [(code, out) for alive, code, out in outcomes if alive]
    assert len(interrupted) >= len(STAGGER_S) // 2, "the runs ended before most Ctrl-Cs: stagger them earlier"
    for code, out in interrupted:
        assert code == 2, out[-1500:]
        assert "Traceback" not in out, out[-1500:]
    assert all(code == 0 for alive, code, _ in outcomes if not alive)  # a run that ended first is whole


# Ctrl-C to `gpubench run` while its build process starts: the interpreter, pytest, its plugins and
# torch import in the first ~0.3 s. Before gpubench.harness.processes.build_main held it from the first line, a
# KeyboardInterrupt traceback from an import (socket, argparse, the assertion rewriter) came at
# 0.02-0.15 s, one of them with exit 1.
BUILD_START_STAGGER_S = [0.0, 0.02, 0.06, 0.15, 0.3]
# A forked build reaches its pytest session within about 0.3 s, where a Ctrl-C is pytest's own interrupt report.
FORKED_START_STAGGER_S = [0.0, 0.02, 0.06]


def build_started(proc: subprocess.Popen[str]) -> bool:
    return bool(build_processes(proc.pid))


def interrupted_gpubench_run(tmp_path: Path, delay_s: float, *how: str) -> tuple[int, str]:
    """(exit code, output) of `gpubench run` given a terminal's Ctrl-C `delay_s` after its build process started."""
    proc = subprocess.Popen([sys.executable, "-m", "gpubench.harness.commands.cli", "run", "--device", "cpu",
                             "--profile", "smoke", "--no-report", f"--results-dir={tmp_path}", "--run-id=r", "-k",
                             "matmul and fp32-n64", *how],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            # PLW1509: no threads
                            preexec_fn=lambda: (signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
                                                os.setsid()))
    deadline = time.monotonic() + 60
    while proc.poll() is None and not build_started(proc) and time.monotonic() < deadline:
        time.sleep(0.002)
    time.sleep(delay_s)
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole foreground group
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out


@pytest.mark.process
@pytest.mark.parametrize(("how", "delay_s"), [(("--no-fork",), delay_s) for delay_s in BUILD_START_STAGGER_S]
                         + [((), delay_s) for delay_s in FORKED_START_STAGGER_S],
                         ids=[f"fresh-interpreter-{d}s" for d in BUILD_START_STAGGER_S]
                         + [f"forked-{d}s" for d in FORKED_START_STAGGER_S])
def test_ctrl_c_while_a_build_process_starts_is_one_line_and_exit_130(tmp_path, how, delay_s):
    code, out = interrupted_gpubench_run(tmp_path, delay_s, *how)
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out[-2000:]
    assert code == 130, out[-2000:]
    assert out.strip().splitlines()[
        -1] == f"gpubench: interrupted: 0 rows kept in {tmp_path / 'r.csv'} (each whole); " \
        "re-run with another --run-id for the rest", out[-2000:]
