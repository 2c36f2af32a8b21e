"""Child processes that never outlive their parent (Linux), nor leave anything behind: a killed
`gpubench run` or pytest must not leave a build process or a torchrun launch running on, appending
rows or holding ranks, and a daemon a build starts must not load the machine later builds
measure."""

from __future__ import annotations

import ctypes
import functools
import re
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import subprocess

from gpubench.harness.core.exits import BUILD_INTERRUPTED, StopSignal, UsageError
from gpubench.harness.core.console import CONSOLE

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 1, 36, 37


def prctl(option: int, *args: Any) -> int | None:
    """libc's prctl (Linux); None where there is none (the parent's own handlers still forward
    signals)."""
    try:
        return int(ctypes.CDLL("libc.so.6", use_errno=True).prctl(option, *args))
    except (OSError, AttributeError):
        return None


def die_with_parent(death_signal: int = signal.SIGTERM) -> None:
    """In the child, before exec: the kernel sends `death_signal` when the parent dies (even by
    SIGKILL). A process that runs a user's code gets SIGKILL: that code may block or ignore SIGTERM,
    and would then outlive its run."""
    prctl(PR_SET_PDEATHSIG, death_signal)


def adopt_orphans() -> bool:
    """Become the descendants' subreaper (Linux): a daemon a build leaves (setsid, a double fork)
    becomes our child, where kill_adopted finds it, instead of loading the machine later runs
    measure. False without subreapers."""
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def adopting() -> bool:
    flag = ctypes.c_int(0)
    return prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) == 0 and flag.value == 1


def child_pids() -> set[int]:
    import psutil

    return {child.pid for child in psutil.Process().children()}


def kill_adopted(known: set[int], left_by: str, grace_s: float = 5.0) -> list[str]:
    """SIGKILL and reap every child not in `known` and its tree (under adopt_orphans: what `left_by`
    left behind), named in one line; returns them as 'sleep (pid 123)'."""
    import psutil

    killed: list[str] = []
    # a killed process's own children are adopted in their turn, to be reaped
    for _ in range(10):
        strays = [child for child in psutil.Process().children() if child.pid not in known]
        if not strays:
            break
        for stray in strays:
            try:
                tree = [stray, *stray.children(recursive=True)]
                # one that ended by itself is only reaped
                if stray.status() != psutil.STATUS_ZOMBIE:
                    killed.append(f"{stray.name()} (pid {stray.pid})")
            except psutil.Error:
                tree = [stray]
            for process in tree:
                try:
                    process.kill()
                except psutil.Error:
                    continue
        # reaps them: our children
        psutil.wait_procs(strays, timeout=grace_s)
    if killed:
        CONSOLE.note(f"killed what {left_by} left running: {', '.join(killed)}")
    return killed


def child_preexec(death_signal: int = signal.SIGTERM) -> Callable[[], None] | None:
    return (
        functools.partial(die_with_parent, death_signal)
        if sys.platform.startswith("linux")
        else None
    )


# A closed terminal's SIGHUP, like Ctrl-C and SIGTERM, must unwind the work in progress, not kill it
# mid-run.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def install_handlers(handler: Any, signums: tuple[int, ...] = STOP_SIGNALS) -> dict[int, Any]:
    """`handler` for each of `signums`, the handlers it replaced returned. One this process ignores
    stays ignored (`nohup` ignores SIGHUP, a shell's background job SIGINT), here and in the builds,
    which inherit it. Raises ValueError outside the main thread."""
    return {
        signum: signal.signal(signum, handler)
        for signum in signums
        if signal.getsignal(signum) is not signal.SIG_IGN
    }


def restore_handlers(previous: dict[int, Any]) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)


@contextmanager
def handlers_installed(handler: Any, signums: tuple[int, ...] = STOP_SIGNALS) -> Iterator[None]:
    """Within, install_handlers's; after, the previous handlers back."""
    previous = install_handlers(handler, signums)
    try:
        yield
    finally:
        restore_handlers(previous)


@contextmanager
def stops_raised() -> Iterator[None]:
    """Within, SIGINT, SIGTERM and SIGHUP raise StopSignal: work this process does itself (the
    report after the builds) ends with its line and exit code, not the default action's silent
    death. Ctrl-C too: Python's own KeyboardInterrupt, raised inside code an extension runs as it is
    imported, has the interpreter kill itself with SIGINT at exit (-2) even once caught; a subclass
    does not. One this process ignores stays ignored."""

    def stop(signum: int, frame: object) -> None:
        raise StopSignal(signum)

    with handlers_installed(stop):
        yield


# "<pid>:<start time>" of the process whose end stops `gpubench run` (a local fleet: its job's
# controller is submitit's, started without PR_SET_PDEATHSIG, and outlives a fleet killed with -9).
STOP_WITH_ENV = "GPUBENCH_STOP_WITH"


def process_token(pid: int) -> str:
    """`pid` with its start time: a later process given the same pid is not the same one."""
    import psutil

    return f"{pid}:{psutil.Process(pid).create_time():.3f}"


def check_stop_token(token: str) -> None:
    """Refuses a `token` not of process_token's form (read as an ended process, it stopped the run
    at once)."""
    if not re.fullmatch(r"[0-9]+:[0-9]+(\.[0-9]+)?", token):
        raise UsageError(
            f"{STOP_WITH_ENV}={token[:60]!r} is not <pid>:<start time>, as gpubench fleet sets it "
            "for the runs of its local jobs — unset it"
        )


def token_alive(token: str) -> bool:
    """Whether `token`'s process still runs: not ended, not a zombie, not a later process given its
    pid."""
    import psutil

    pid_text, _, started = token.partition(":")
    try:
        process = psutil.Process(int(pid_text))
        return (
            f"{process.create_time():.3f}" == started and process.status() != psutil.STATUS_ZOMBIE
        )
    except (psutil.NoSuchProcess, ValueError):
        return False
    # another user's, alive
    except psutil.AccessDenied:
        return True


def is_stopped(pid: int) -> bool:
    """Whether `pid` is stopped (SIGSTOP, Ctrl-Z: state T); False when it is gone or cannot be
    read."""
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_STOPPED
    except psutil.Error:
        return False


def kill_group(pgid: int) -> None:
    """SIGKILL a child's process group (its own, from a setpgid at its start), then SIGCONT: a
    stopped process dies of SIGKILL too, a stopped descendant outside the group gets to act on its
    PDEATHSIG."""
    import os

    for signum in (signal.SIGKILL, signal.SIGCONT):
        try:
            os.killpg(pgid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def kill_tree(proc: subprocess.Popen[str]) -> None:
    """SIGKILL a launch and every process under it: torchrun starts each rank in a session of its
    own, so they are found (while torchrun still holds them) and killed one by one, then torchrun's
    group."""
    import os

    import psutil

    try:
        ranks = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        ranks = []
    for rank in ranks:
        try:
            rank.kill()
        except psutil.Error:
            # already gone
            continue
    try:
        # the group start_new_session gave it (not ours)
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def ended_unreaped(pid: int, within_s: float) -> bool:
    """Whether the child ended within `within_s`, left unreaped: until then its pid and group id
    name no other process, so what is left in its group can be killed by that id safely."""
    import time

    deadline = time.monotonic() + within_s
    while not _is_zombie(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(within_s / 5)
    return True


def _is_zombie(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    # already reaped (ZombieProcess too: macOS cannot read a zombie)
    except psutil.NoSuchProcess:
        return True


# gpubench run's scratch folder: gpubench-run-<pid>-<random>
RUN_FOLDER_PREFIX = "gpubench-run-"


def run_folder_prefix(pid: int) -> str:
    return f"{RUN_FOLDER_PREFIX}{pid}-"


# a run in another pid namespace sharing /tmp looks dead: leave young folders alone
SWEEP_MIN_AGE_S = 60.0


def _ours_and_old(path: Path) -> bool:
    import os
    import time

    try:
        # the folder itself, never a link's target
        info = path.lstat()
    except OSError:
        return False
    # the owner's uid: root spares others' too
    return info.st_uid == os.getuid() and time.time() - info.st_mtime > SWEEP_MIN_AGE_S


def sweep_dead_run_folders(folder: Path) -> list[Path]:
    """Remove the scratch folders of killed `gpubench run`s (SIGKILL leaves no chance to clean up)
    whose pid is gone."""
    import shutil

    import psutil

    removed = []
    for path in folder.glob(f"{RUN_FOLDER_PREFIX}*"):
        pid_text = path.name[len(RUN_FOLDER_PREFIX) :].split("-", 1)[0]
        if (
            path.is_dir()
            and not path.is_symlink()
            and pid_text.isdigit()
            and _ours_and_old(path)
            and not psutil.pid_exists(int(pid_text))
        ):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


class HeldInterrupt:
    """Ctrl-C outside pytest's session (imports before it; benchmark files, summary, unconfigure
    after it), where a KeyboardInterrupt would kill the process (-2, a traceback): held, then raised
    at the first hook or made exit 2. In the session the first raises and later ones are held
    (`raise_once`): the terminal's Ctrl-C and the one `gpubench run` passes on must not cut the
    first one's unwinding short."""

    def __init__(self) -> None:
        self.pending = False
        self.previous: object = None
        # pytest runs as this process's command (a build): it leaves through exit_process
        self.owns_process = False

    def __call__(self, signum: int, frame: object) -> None:
        self.pending = True

    def raise_once(self, signum: int, frame: object) -> None:
        # from now on held (previous stays Python's own handler)
        signal.signal(signal.SIGINT, self)
        raise KeyboardInterrupt

    def hold(self) -> None:
        """Only over Python's own handler or raise_once, from the main thread (not inside an
        embedding host's)."""
        import threading

        current = signal.getsignal(signal.SIGINT)
        if threading.current_thread() is threading.main_thread() and (
            current is signal.default_int_handler or current == self.raise_once
        ):
            signal.signal(signal.SIGINT, self)
            self.previous = signal.default_int_handler

    def release(self, then: Callable[[int, object], None] | None = None) -> bool:
        """Python's handler back (or `then`); True when Ctrl-C came while held."""
        current = signal.getsignal(signal.SIGINT)
        if current is self or (then is None and current == self.raise_once):
            signal.signal(signal.SIGINT, then or self.previous)
        pending, self.pending = self.pending, False
        return pending

    def exit_process(self, status: int) -> None:
        """A command-line pytest's atexit callback: leave now with the status (2 after a held
        Ctrl-C). After atexit Python resets its handlers and tears torch down for ~2 s, when Ctrl-C
        would kill it (-2); all is written."""
        import os

        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(BUILD_INTERRUPTED if self.pending else status)


HELD_INTERRUPT = HeldInterrupt()
