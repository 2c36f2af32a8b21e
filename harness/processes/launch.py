"""Launchers (`Launcher.run(job)`): ProcessLauncher, a build in a process group of its own that dies
with this process, gets SIGINT, SIGTERM and SIGHUP passed on once, then STOP_GRACE_S to stop with
its rows whole, and is cut from outside past the run's end (`cut_at_s`); torchrun's is in
gpubench.harness.processes.torchrun."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Protocol

from gpubench.harness.processes.lifetime import (
    STOP_SIGNALS,
    adopting,
    child_pids,
    child_preexec,
    ended_unreaped,
    handlers_installed,
    is_stopped,
    kill_adopted,
    kill_group,
    token_alive,
)
from gpubench.harness.processes.protocol import BuildAnswer, BuildPlan, Channel
from gpubench.harness.core.console import CONSOLE

# how often a launch's watch (Job.watch) is asked
WATCH_PERIOD_S = 1.0


@dataclass
class Job:
    argv: list[str]
    env: dict[str, str] | None = None
    timeout_s: float | None = None
    pass_fds: tuple[int, ...] = ()
    # TorchrunLauncher polls it every WATCH_PERIOD_S; a non-empty answer (why, e.g. 'rank 1 stopped
    # responding ...') kills the launch with its ranks. ProcessLauncher does not watch.
    watch: Callable[[], str] | None = None
    # ProcessLauncher: the child is build_main, which unblocks SIGINT itself
    hold_sigint: bool = False
    # ProcessLauncher: sent to build_main, whose answer comes back
    plan: BuildPlan | None = None


@dataclass
class Completed:
    code: int
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    # the watch's answer when it ended the launch (ProcessLauncher: why it killed the build)
    stalled: str = ""
    # ProcessLauncher: the first signal this process got and passed on during the launch
    signal: int = 0
    # ProcessLauncher: what a planned build answered (None: it died first)
    answer: BuildAnswer | None = None
    # a planned build exited 0 before its session ended: its own code called os._exit
    vanished: bool = False
    # ProcessLauncher: why and how it cut the build from outside, past the run's end ('' if it did
    # not)
    cut: str = ""


class Launcher(Protocol):
    def run(self, job: Job) -> Completed: ...


@dataclass
class ProcessLauncher:
    """A build in a group of its own, so that a terminal's Ctrl-C and a `kill -INT` of this process
    alone each reach it once; one stopped (state T) for `stopped_limit_s` is killed and named.
    `stop_with` names a process whose end is passed on as SIGTERM (a local fleet: its job's
    controller outlives a fleet killed with -9). A build still running at `cut_at_s` (wall clock) is
    cut from outside: the run's in-process cut (a SIGALRM) cannot reach code stuck in one C call or
    that blocked it, so SIGTERM, then SIGKILL of its group CUT_GRACE_S later; `cut_why` starts its
    line."""

    stopped_limit_s: float | None = None
    stop_with: str = ""
    cut_at_s: float | None = None
    cut_why: str = ""
    # a signal while a build starts (watch_builds)
    stop: StopRequest = field(default_factory=lambda: StopRequest())

    def kept_pids(self) -> set[int]:
        """Children kept between builds (none here): never a build's stray."""
        return set()

    def run(self, job: Job) -> Completed:
        return run_together([(self, job)])[0]

    def start(self, job: Job, channel: Channel | None) -> BuildHandle:
        own = channel.build_args() if channel is not None else []
        fds = channel.child_fds if channel is not None else ()
        child = _PlainBuild(
            [*job.argv, *own],
            env=safe_path(job.env),
            preexec_fn=build_preexec(job.hold_sigint),
            pass_fds=(*job.pass_fds, *fds),
        )
        if channel is not None:
            channel.handed_over()
        return child


def run_together(
    runs: list[tuple[ProcessLauncher, Job]], ended: Callable[[int], None] | None = None
) -> list[Completed]:
    """Each job through its launcher, all at once; what each planned build answered (None: it died
    first)."""
    channels = [Channel(job.plan).open() if job.plan is not None else None for _, job in runs]
    starts = [
        (launcher, functools.partial(launcher.start, job, channel))
        for (launcher, job), channel in zip(runs, channels)
    ]
    try:
        done = watch_builds(starts, ended)
    finally:
        answers = [channel.answer() if channel is not None else None for channel in channels]
    return [
        replace(
            completed,
            answer=answer,
            vanished=job.plan is not None
            and completed.code == 0
            and (answer is None or answer.exit_code is None),
        )
        for completed, answer, (_, job) in zip(done, answers, runs)
    ]


def watch_builds(
    starts: list[tuple[ProcessLauncher, Callable[[], BuildHandle]]],
    ended: Callable[[int], None] | None = None,
) -> list[Completed]:
    """Start each build and wait for all at once (`gpubench ab`'s pairs), passing each signal on to
    every one; `ended(i)` as build i ends. However this leaves, no build it started outlives it."""
    # the handlers go in before a build starts: a signal while Popen forks and execs (the build
    # already visible, Popen not yet returned) waits in `early` and is passed on once it can be
    # (signal, how many builds had started and were told it)
    early: list[tuple[int, int]] = []
    watches: list[BuildWatch] = []
    # a launcher's start that waits (a fork server's answer) gives up on a signal
    request = StopRequest()
    for launcher, _ in starts:
        launcher.stop = request

    def passed_on(signum: int, frame: object) -> None:
        request.signum = request.signum or signum
        for watch in watches:
            watch.signalled(signum)
        if len(watches) < len(starts):
            early.append((signum, len(watches)))

    # under adopt_orphans: what a build leaves is killed after it
    known = child_pids() if adopting() else None
    try:
        with handlers_installed(passed_on, PASSED_ON):
            for launcher, start in starts:
                watches.append(
                    BuildWatch(
                        start(),
                        launcher.stopped_limit_s,
                        launcher.stop_with,
                        cut_at_s=launcher.cut_at_s,
                        cut_why=launcher.cut_why,
                    )
                )
            for signum, told in early:
                for watch in watches[told:]:
                    watch.signalled(signum)
            done = _wait_all(watches, ended)
        # a signal that came as a build ended (its answer read, its strays killed) is the run's all
        # the same
        return [replace(completed, signal=completed.signal or request.signum) for completed in done]
    finally:
        for watch in watches:
            # this process is leaving (an exception): its build goes with it
            if watch.child.running():
                watch.child.kill_group()
        if known is not None:
            kept = {pid for launcher, _ in starts for pid in launcher.kept_pids()}
            kill_adopted(known | kept | {watch.child.pid for watch in watches}, "the build process")


def _wait_all(watches: list[BuildWatch], ended: Callable[[int], None] | None) -> list[Completed]:
    done: dict[int, Completed] = {}
    while len(done) < len(watches):
        for index, watch in enumerate(watches):
            if index not in done and (completed := watch.poll(POLL_S / len(watches))) is not None:
                done[index] = completed
                if ended is not None:
                    ended(index)
    return [done[index] for index in range(len(watches))]


# Passed on to the build process, whose plugin unwinds the case in progress on each: a closed
# terminal's SIGHUP would otherwise kill this process mid-run and leave its scratch folder behind.
PASSED_ON = STOP_SIGNALS
# after passing a signal on: how long a build may take to unwind its case
STOP_GRACE_S = 10.0
# after the cut's SIGTERM past the run's end: how long before SIGKILL
CUT_GRACE_S = 5.0
# the same signal again sooner is the first one twice (see BuildWatch.signalled)
REPEAT_S = 1.0
# how often the launcher looks at its build (stopped?); its end is seen within a fifth of it
POLL_S = 0.1
# how often it asks whether ProcessLauncher.stop_with's process still runs
STOP_WITH_PERIOD_S = 1.0


def build_preexec(hold_sigint: bool, death_signal: int = signal.SIGKILL) -> Callable[[], None]:
    """The child dies with this process (a build by SIGKILL: its user code may block SIGTERM), in a
    group of its own (setpgid: Popen's process_group needs 3.11). SIGTTOU and SIGTTIN are ignored: a
    background group's first print under `stty tostop` or read (pdb) stopped it for good. With
    `hold_sigint` SIGINT starts blocked (build_main unblocks it): a Ctrl-C at start-up waits,
    pending."""
    dies_with_parent = child_preexec(death_signal)

    def preexec() -> None:
        if dies_with_parent is not None:
            dies_with_parent()
        os.setpgid(0, 0)
        for signum in (signal.SIGTTOU, signal.SIGTTIN):
            signal.signal(signum, signal.SIG_IGN)
        if hold_sigint:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})

    return preexec


class BuildHandle(Protocol):
    """A started build as ProcessLauncher watches it: its own child, or a fork server's
    (pytest_plugin.forked)."""

    pid: int

    def send_signal(self, signum: int) -> None: ...
    # ended, not yet reaped: its group id still names its group
    def ended(self, within_s: float) -> bool: ...
    def kill_group(self) -> None: ...
    # its exit code, negative for a signal's death
    def wait(self) -> int: ...
    def running(self) -> bool: ...
    # which process it waits on is stopped (state T): "it", "its fork server", ""
    def stopped(self) -> str: ...
    # why it ended other than by its exit or a signal to it (its fork server died), or ""
    def lost(self) -> str: ...


class _PlainBuild(subprocess.Popen):  # type: ignore[type-arg]
    """A build that is this process's own child: its pid, send_signal and wait are Popen's."""

    def ended(self, within_s: float) -> bool:
        return ended_unreaped(self.pid, within_s)

    def kill_group(self) -> None:
        kill_group(self.pid)

    def running(self) -> bool:
        return self.poll() is None

    def stopped(self) -> str:
        return "it" if is_stopped(self.pid) else ""

    def lost(self) -> str:
        return ""


@dataclass
class BuildWatch:
    """One build as ProcessLauncher waits for it: the signals passed on, since when it is
    stopped."""

    child: BuildHandle
    stopped_limit_s: float | None
    stop_with: str = ""
    stop_with_checked_s: float = 0.0
    signals: list[int] = field(default_factory=list)
    first_signal_s: float = 0.0
    stopped_since_s: float | None = None
    # what was stopped when a signal came or the limit passed: "it", "its fork server"
    was_stopped: str = ""
    # ProcessLauncher.cut_at_s
    cut_at_s: float | None = None
    cut_why: str = ""
    # when the cut's SIGTERM went
    cut_since_s: float | None = None

    def signalled(self, signum: int) -> None:
        """Pass the signal on (with SIGCONT, so a stopped build can act on it) and remember it. The
        same signal within REPEAT_S is one Ctrl-C arriving twice (the terminal's, and a parent's
        passing it on), not a second one."""
        now_s = time.monotonic()
        if self.signals and signum == self.signals[-1] and now_s - self.first_signal_s < REPEAT_S:
            return
        self.signals.append(signum)
        self.first_signal_s = self.first_signal_s or now_s
        self.was_stopped = self.was_stopped or self.child.stopped()
        self._send(signum)

    def _send(self, signum: int) -> None:
        for sent in (signum, signal.SIGCONT):
            try:
                self.child.send_signal(sent)
            except ProcessLookupError:
                pass

    def poll(self, within_s: float) -> Completed | None:
        """The build's end if it came within `within_s` (or it had to be killed now), else None."""
        # its group id cannot name another group yet
        if self.child.ended(within_s):
            # what it left behind in its group (a wrapper's background process)
            self.child.kill_group()
            return self._completed(self.child.wait(), self.child.lost())
        why = self._why_end()
        if why or self._cut_due():
            self.child.kill_group()
            return self._completed(self.child.wait(), why, killed=True)
        return None

    def _cut_due(self) -> bool:
        """Past the run's end (cut_at_s) the build gets SIGTERM, which unwinds a case still in
        Python; True once CUT_GRACE_S more have passed: it is then killed, whatever it blocked or
        ignored."""
        if (
            self.cut_at_s is None
            or (self.signals and self.cut_since_s is None)
            or time.time() < self.cut_at_s
        ):
            return False
        if self.cut_since_s is None:
            self.cut_since_s = time.monotonic()
            self._send(signal.SIGTERM)
        return time.monotonic() - self.cut_since_s >= CUT_GRACE_S

    def _why_end(self) -> str:
        """Why the build must be killed now, or ''."""
        now_s = time.monotonic()
        if (
            self.stop_with
            and not self.signals
            and now_s - self.stop_with_checked_s >= STOP_WITH_PERIOD_S
        ):
            self.stop_with_checked_s = now_s
            if not token_alive(self.stop_with):
                CONSOLE.note(
                    f"the fleet that started this run (pid {self.stop_with.split(':')[0]}) has "
                    "ended: stopping as on SIGTERM"
                )
                self.signalled(signal.SIGTERM)
        name = signal.Signals(self.signals[0]).name if self.signals else ""
        if len(self.signals) > 1:
            return f"was killed at a second {signal.Signals(self.signals[-1]).name}"
        if self.signals and now_s - self.first_signal_s > STOP_GRACE_S:
            return f"did not stop within {STOP_GRACE_S:.0f} s of {name}: killed"
        stopped = self.child.stopped()
        self.stopped_since_s = (self.stopped_since_s or now_s) if stopped else None
        if (
            stopped
            and self.stopped_limit_s is not None
            and now_s - self.stopped_since_s >= self.stopped_limit_s
        ):
            self.was_stopped = stopped
            return (
                f"made no progress: {stopped} was stopped (state T, SIGSTOP) for "
                f"{self.stopped_limit_s:.0f} s: killed"
                + (", the build with it" if stopped != "it" else "")
            )
        return ""

    def _completed(self, code: int, why: str, killed: bool = False) -> Completed:
        cut = ""
        if self.cut_since_s is not None:
            cut = f"{self.cut_why}: cut from outside, " + (
                f"killed (SIGKILL) when SIGTERM had not ended it within {CUT_GRACE_S:.0f} s"
                if killed
                else "ended by SIGTERM"
            )
        # which build was stopped is worth a line: someone stopped it
        if self.was_stopped and self.signals:
            name = signal.Signals(self.signals[0]).name
            continued = (
                f"had been stopped (state T): continued so it could act on {name}"
                if self.was_stopped == "it"
                else f"waited on {self.was_stopped}, which had been stopped (state T): continued "
                f"so it could pass {name} on"
            )
            why = f"{continued}, but {why}" if why else continued
        return Completed(code, stalled=why, signal=self.signals[0] if self.signals else 0, cut=cut)


# pytest's exit codes: 0 passed, 1 some failed, 2 interrupted, 3 internal error, 4 usage error, 5 no
# tests collected (for a later build: the first build's collection asked for more, so it is named
# and no later build starts: the later ones would select nothing either); gpubench's plugin adds 75
# (results folder full), 143 (SIGTERM) and 129 (SIGHUP): the case in progress unwound. A negative
# code is the signal that killed the build process.
NO_TESTS = 5
# How long a process may make no progress before it is killed and named, per profile: a build
# stopped (SIGSTOP, state T) here, a DDP rank whose heartbeat went stale
# (gpubench.harness.workloads.ddp).
STOPPED_LIMIT_S = {"smoke": 30.0, "quick": 60.0, "full": 120.0}


def stopped_limit_s(profile: str) -> float:
    return STOPPED_LIMIT_S.get(str(profile), STOPPED_LIMIT_S["full"])


def signal_death(code: int) -> str:
    """'SIGKILL (...)' from the exit code of a process a signal ended (-9, or a shell's 137), else
    ''."""
    signum = -code if code < 0 else code - 128 if 128 < code < 128 + 65 else 0
    try:
        name = signal.Signals(signum).name
    except ValueError:
        return ""
    hints = {
        "SIGKILL": "kill -9, or the kernel's out-of-memory killer under a memory cap: see dmesg",
        "SIGABRT": "an abort, often an allocation refused under a memory cap (ulimit -v)",
        "SIGSEGV": "a crash in native code",
    }
    return f"{name} ({hints[name]})" if name in hints else name


@dataclass
class StopRequest:
    # the first of PASSED_ON this process got, 0 while none came
    signum: int = 0


@contextmanager
def stop_requests() -> Iterator[StopRequest]:
    """SIGINT, SIGTERM or SIGHUP stops a run of builds after the build in progress (which gets it
    passed on), or between two builds: never a KeyboardInterrupt, never a death without a line."""
    request = StopRequest()

    def note(signum: int, frame: object) -> None:
        request.signum = request.signum or signum

    with handlers_installed(note, PASSED_ON):
        yield request


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def safe_path(env: dict[str, str] | None) -> dict[str, str]:
    """A build's interpreter does not put its working folder first on the import path (`python -m`
    does): a `torch.py` or `pytest.py` there would be imported instead of the real one.
    PYTHONSAFEPATH is Python 3.11's; an older side's interpreter ignores it. The user's own modules
    stay importable: --model appends the folder."""
    return {**(os.environ if env is None else env), "PYTHONSAFEPATH": "1"}


def python_module(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]
