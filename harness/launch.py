"""Launchers: how gpubench starts the processes that measure. One interface, `Launcher.run(job)`:

- `ProcessLauncher`: a foreground child that dies with this process; SIGTERM and SIGHUP (the
  terminal closed) here are passed on, Ctrl-C (which the terminal's whole group gets) waits for it to stop with its rows whole;
- `TorchrunLauncher`: torchrun in a session of its own, output captured, killed with every rank
  when it outlives its timeout or when the job's watch (polled every second) names a rank that
  stopped responding.

`run_builds` runs the suite as one process per build on any of them: build k of every case in
process k, the first process reporting over a pipe how many builds the selection needs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

import psutil

from harness.lifetime import child_preexec

KILL_GRACE_S = 30  # after SIGKILL, how long to wait for the killed launch's output
WATCH_PERIOD_S = 1.0  # how often a launch's watch (Job.watch) is asked


@dataclass
class Job:
    argv: list[str]
    env: dict[str, str] | None = None
    timeout_s: float | None = None
    pass_fds: tuple[int, ...] = ()
    # TorchrunLauncher polls it every WATCH_PERIOD_S; a non-empty answer (why, e.g. 'rank 1 stopped
    # responding ...') kills the launch with its ranks. ProcessLauncher does not watch.
    watch: Callable[[], str] | None = None


@dataclass
class Completed:
    code: int
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    stalled: str = ""  # the watch's answer when it ended the launch


class Launcher(Protocol):
    def run(self, job: Job) -> Completed: ...


@dataclass
class ProcessLauncher:
    def run(self, job: Job) -> Completed:
        child = subprocess.Popen(job.argv, env=job.env, preexec_fn=child_preexec(), pass_fds=job.pass_fds)
        previous = {signum: signal.signal(signum, lambda signum, frame: child.send_signal(signum)) for signum in FORWARDED_SIGNALS}
        try:
            while True:
                try:
                    return Completed(child.wait())
                except KeyboardInterrupt:  # pytest in the child stops at the case's edge; wait for it
                    continue
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


# Passed on to the build process, whose plugin unwinds the case in progress on either: a closed
# terminal's SIGHUP would otherwise kill this process mid-run and leave its scratch folder behind.
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def kill_tree(proc: subprocess.Popen[str]) -> None:
    """SIGKILL a launch and every process under it. torchrun starts each rank in a session of its
    own, so killing its process group alone would orphan them: they are found (while torchrun
    still holds them) and killed one by one, then torchrun's group."""
    try:
        ranks = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        ranks = []
    for rank in ranks:
        try:
            rank.kill()
        except psutil.Error:
            continue  # already gone
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the group start_new_session gave it (not ours)
    except (ProcessLookupError, PermissionError):
        pass


@dataclass
class TorchrunLauncher:
    """A session of its own, so the whole launch can be killed without touching this process;
    it dies with this process too (torchrun then stops its ranks)."""

    def run(self, job: Job) -> Completed:
        proc = subprocess.Popen(job.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=job.env,
                                start_new_session=True, preexec_fn=child_preexec())
        deadline_s = None if job.timeout_s is None else time.monotonic() + job.timeout_s
        try:
            while True:
                left_s = None if deadline_s is None else max(0.0, deadline_s - time.monotonic())
                wait_s = left_s if job.watch is None else min(WATCH_PERIOD_S, WATCH_PERIOD_S if left_s is None else left_s)
                try:  # communicate() may be called again after its timeout: nothing read so far is lost
                    stdout, stderr = proc.communicate(timeout=wait_s)
                    return Completed(proc.returncode, stdout, stderr)
                except subprocess.TimeoutExpired:
                    stalled = job.watch() if job.watch is not None else ""
                    if stalled or (deadline_s is not None and time.monotonic() >= deadline_s):
                        return self._killed(proc, stalled)
        finally:
            if proc.poll() is None:  # interrupted (Ctrl-C no longer reaches a separate session): take the ranks down too
                kill_tree(proc)
                proc.wait()

    @staticmethod
    def _killed(proc: subprocess.Popen[str], stalled: str) -> Completed:
        kill_tree(proc)
        try:
            stdout, stderr = proc.communicate(timeout=KILL_GRACE_S)
        except subprocess.TimeoutExpired:  # something outside the tree still holds the pipes: do not wait on it
            stdout, stderr = "", ""
        return Completed(proc.returncode if proc.returncode is not None else -9, stdout, stderr, timed_out=not stalled, stalled=stalled)


# pytest's exit codes: 0 passed, 1 some failed, 2 interrupted, 3 internal error, 4 usage error,
# 5 no tests collected (for a later build: every case has fewer builds, the run is complete);
# gpubench's plugin adds 75 (results folder full), 143 (SIGTERM) and 129 (SIGHUP): the case in
# progress unwound. A negative code is the signal that killed the build process.
NO_TESTS = 5
MAX_BUILDS = 100


@dataclass
class BuildsOutcome:
    code: int  # the worst exit code, or the one that stopped the run
    builds: int
    stopped: bool = False
    notes: list[str] = field(default_factory=list)
    died: str = ""  # which build process a signal killed, and how: 'build 2 of 3 was killed by SIGKILL (...)'


def signal_death(code: int) -> str:
    """How a process a signal ended died: 'SIGKILL (...)' from its exit code (-9, or a shell's 137), '' if not."""
    signum = -code if code < 0 else code - 128 if 128 < code < 128 + 65 else 0
    try:
        name = signal.Signals(signum).name
    except ValueError:
        return ""
    hints = {"SIGKILL": "kill -9, or the kernel's out-of-memory killer under a memory cap: see dmesg",
             "SIGABRT": "an abort, often an allocation refused under a memory cap (ulimit -v)", "SIGSEGV": "a crash in native code"}
    return f"{name} ({hints[name]})" if name in hints else name


def read_build_count(fd: int) -> int | None:
    with os.fdopen(fd, "r") as pipe:
        text = pipe.read().strip()
    try:
        return int(json.loads(text.splitlines()[-1])["builds"]) if text else None
    except (ValueError, KeyError, TypeError):
        return None


def run_builds(launcher: Launcher, argv_for: Callable[[int], list[str]], env: dict[str, str] | None, stop_codes: tuple[int, ...],
               on_build: Callable[[int, int], None] = lambda build, builds: None) -> BuildsOutcome:
    """Build k of every case in process k (pyperf's lesson: separate processes sample memory
    layout, thread placement and another moment of the machine). The first process's collection
    writes the selection's build count to a pipe (--gpubench-report-fd)."""
    worst, builds, build = 0, 1, 0
    while build < builds:
        on_build(build, builds)
        read_fd, write_fd = os.pipe() if build == 0 else (None, None)
        argv = argv_for(build) + ([f"--gpubench-report-fd={write_fd}"] if write_fd is not None else [])
        try:
            code = launcher.run(Job(argv, env, pass_fds=(write_fd,) if write_fd is not None else ())).code
        finally:
            if write_fd is not None:
                os.close(write_fd)
        count = read_build_count(read_fd) if read_fd is not None else None
        if code == NO_TESTS and build == 0:
            return BuildsOutcome(code, 0, True, ["no case matched the selection (-k/-m): nothing was run"])
        if count is not None:  # read even from a process that died after its collection: 'build 1 of 3'
            builds = min(MAX_BUILDS, max(1, count))
        if code < 0 or (code not in stop_codes and signal_death(code)):  # killed: not an exit pytest chose
            return BuildsOutcome(code if code >= 0 else 128 - code, builds, True,
                                 died=f"build {build + 1} of {builds} was killed by {signal_death(code)}")
        if code in stop_codes:
            return BuildsOutcome(code, builds, True)
        worst = max(worst, code if code != NO_TESTS else 0)
        build += 1
    return BuildsOutcome(worst, builds)


def python_module(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]
