"""A fork server: pytest, torch and this plugin imported once (~2.5 s) with no device touched,
forking one process per build. gpubench.harness.pytest_plugin.forked talks to it over a socket
(`start`, `signal`, `kill`; answers `ready`, `started`, `ended`, or `fork_unsafe` when a fork
became unsafe). Only the server may wait for its children. When the run is gone (SIGTERM, its
parent-death signal, or the end of the socket) the server ends its build as the run's launcher
would: SIGTERM, then SIGKILL of its group (the build's own parent-death signal is SIGKILL: its user
code may block SIGTERM)."""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from gpubench.harness.core.console import CONSOLE
from gpubench.harness.processes.lifetime import (
    HELD_INTERRUPT,
    die_with_parent,
    install_handlers,
    kill_group,
)

# one control message; the plans travel in pipes, not here
MAX_CONTROL_BYTES = 65536


class _RunGone(BaseException):
    """SIGTERM to the server: the run that started it has died (its parent-death signal) or is
    stopping it."""


def run_gone(signum: int, frame: object) -> None:
    # a second one must not cut the build's end short
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise _RunGone


def send(control: socket.socket, message: dict[str, Any], fds: tuple[int, ...] = ()) -> None:
    socket.send_fds(control, [json.dumps(message).encode()], list(fds))


def receive(control: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    """One message and the descriptors that came with it; (None, []) at the other side's end."""
    data, fds, _, _ = socket.recv_fds(control, MAX_CONTROL_BYTES, 2)
    if not data:
        return None, []
    try:
        message = json.loads(data)
    except ValueError:
        message = {}
    return (message if isinstance(message, dict) else {}), fds


@contextmanager
def output_held() -> Iterator[None]:
    """Descriptors 1 and 2 into a temporary file while the imports run, shown only if they fail: in
    a build pytest's collection captures what they print (torch's CUDA_HOME line)."""
    with tempfile.TemporaryFile() as held:
        saved = [os.dup(1), os.dup(2)]
        for fd in (1, 2):
            os.dup2(held.fileno(), fd)
        failed = True
        try:
            yield
            failed = False
        finally:
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            for fd, copy in zip((1, 2), saved):
                os.dup2(copy, fd)
                os.close(copy)
            if failed:
                held.seek(0)
                CONSOLE.show_error(held.read().decode(errors="replace"))


def preload() -> str:
    """Import what every build imports (not plugin.py: pytest rewrites its asserts as it loads it),
    and run nothing; '' when builds may be forked from here, else why not."""
    import importlib
    import pkgutil

    with output_held():
        import pytest  # noqa: F401
        import pytest_benchmark.plugin  # noqa: F401
        import torch  # noqa: F401  (the server's point: imported once)

        import gpubench.harness.workloads
        from gpubench.harness.pytest_plugin import build_answer, build_setup, fixture, run_state  # noqa: F401

        for module in pkgutil.iter_modules(
            gpubench.harness.workloads.__path__, "gpubench.harness.workloads."
        ):
            # a torchrun rank's entry, never imported by a build
            if not module.name.endswith("_worker"):
                importlib.import_module(module.name)
    return why_fork_unsafe()


def preload_compiler() -> str:
    """torch._dynamo (~1.5 s), which torch.profiler imports for every build's CPU peak-memory
    measurement: imported before the second build, not at start, so a one-build run does not pay it.
    Imports only: no thread."""
    with output_held():
        import torch._dynamo  # noqa: F401
    return why_fork_unsafe()


def why_fork_unsafe() -> str:
    """Why a fork is unsafe: a device runtime initialised (torch), another thread (its copied locks
    never open; numpy's OpenBLAS pool stops itself around a fork, so it does not count), or not
    Linux."""
    import torch

    if not sys.platform.startswith("linux"):
        return f"{sys.platform} starts processes with spawn rules: a fork of torch is unsafe there"
    if torch.cuda.is_initialized():
        return "CUDA is initialised in the fork server: a forked build could not use it"
    if threading.active_count() > 1:
        others = threading.active_count() - 1
        return (
            f"{others} other Python thread(s) run in the fork server: a fork would copy their locks"
        )
    if forks_lack_cuda():
        return (
            "torch asked the CUDA runtime a question in the fork server "
            "(torch.cuda.is_available() at an import): a forked build could not use CUDA"
        )
    return ""


def forks_lack_cuda() -> bool:
    """Whether a child forked now could not use CUDA: torch marks every later fork so once the
    process asks the CUDA runtime anything (is_available() at an import included) while
    is_initialized() stays False; only a child tells."""
    import torch

    if not torch.cuda._is_compiled():
        return False
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    # nothing but the answer: no Python-level cleanup in a copy of the server
    if pid == 0:
        os.write(write_fd, b"1" if torch.cuda._is_in_bad_fork() else b"0")
        os._exit(0)
    os.close(write_fd)
    try:
        return os.read(read_fd, 1) != b"0"
    finally:
        os.close(read_fd)
        os.waitpid(pid, 0)


def forked_build(plan_fd: int, answer_fd: int, server_pid: int) -> int:
    """In the child: its own process group and parent-death signal, then the build as a plain one
    runs it."""
    from gpubench.harness.processes.build_main import run_from_fds

    os.setpgid(0, 0)
    die_with_parent(signal.SIGKILL)
    # the server died before the parent-death signal was set
    if os.getppid() != server_pid:
        return 128 + signal.SIGTERM
    # imported lazily, by no module the server loads: else seeded in the server
    if "numpy.random" in sys.modules:
        # from the OS's entropy, as a fresh interpreter's
        sys.modules["numpy.random"].seed()
    HELD_INTERRUPT.hold()
    # a pending Ctrl-C arrives here, held
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    return run_from_fds(plan_fd, answer_fd)


def serve_build(control: socket.socket, plan_fd: int, answer_fd: int) -> bool:
    """Fork one build, pass the launcher's signals on, reap it and say how it ended; False when the
    launcher is gone (the build is then ended first: SIGTERM, then SIGKILL)."""
    for stream in (sys.stdout, sys.stderr):
        # else the child prints this process's buffered output again
        stream.flush()
    server_pid = os.getpid()
    own_handler = signal.getsignal(signal.SIGTERM)
    # none reaches the child under the server's handler
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    pid = os.fork()
    if pid == 0:
        build_child(control, plan_fd, answer_fd, server_pid, own_handler)
    # here too: its group exists before the launcher may kill it, whichever of the two calls runs
    # first
    try:
        os.setpgid(pid, pid)
    # it already ended
    except OSError:
        pass
    os.close(plan_fd)
    os.close(answer_fd)
    ended = os.pidfd_open(pid)
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        send(control, {"started": pid})
        if follow_build(control, pid, ended):
            return True
        end_build(pid, ended)
        return False
    except _RunGone:
        end_build(pid, ended)
        raise
    finally:
        os.close(ended)


def build_child(
    control: socket.socket, plan_fd: int, answer_fd: int, server_pid: int, own_handler: Any
) -> None:
    """The forked child's whole life: the build, then its exit; never back into the server's
    loop."""
    control.close()
    # the server's: the build's SIGTERM is the plugin's to take, as in a plain build
    if own_handler is run_gone:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    code = 3
    try:
        code = forked_build(plan_fd, answer_fd, server_pid)
    # said, then the build's exit: never an exception into the server's loop
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        HELD_INTERRUPT.exit_process(code)


def follow_build(control: socket.socket, pid: int, ended: int) -> bool:
    """Pass the launcher's signals on until the build ends (True, its end said) or the launcher is
    gone (False)."""
    while True:
        readable, _, _ = select.select([control, ended], [], [])
        if ended in readable:
            # what it left in its group; its pid is not reaped yet, so the group is still its
            kill_group(pid)
            send(control, {"ended": os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])})
            return True
        message, fds = receive(control)
        for fd in fds:
            os.close(fd)
        if message is None:
            return False
        if message.get("op") == "signal" and isinstance(message.get("signum"), int):
            os.kill(pid, message["signum"])
        elif message.get("op") == "kill":
            kill_group(pid)


def end_build(pid: int, ended: int) -> None:
    """The launcher is gone: SIGTERM lets the case in progress unwind (rows whole), SIGKILL of its
    group CUT_GRACE_S later ends one that blocked or ignored it; then reaped."""
    from gpubench.harness.processes.launch import CUT_GRACE_S

    # this process leaves after it: nothing may cut the grace short
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    # reaped as its end was being said: its pid may name another process already
    except ChildProcessError:
        return
    for signum in (signal.SIGTERM, signal.SIGCONT):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            break
    select.select([ended], [], [], CUT_GRACE_S)
    kill_group(pid)
    os.waitpid(pid, 0)


def main(control_fd: int) -> int:
    # closed on the way out (PYTHONWARNINGS=error)
    with socket.socket(fileno=control_fd) as control:
        try:
            # from here SIGTERM ends the build in progress first (unless this process was started
            # with it ignored)
            install_handlers(run_gone, (signal.SIGTERM,))
            return serve(control)
        except _RunGone:
            return 128 + signal.SIGTERM


def serve(control: socket.socket) -> int:
    why = preload()
    # the imports out of the collector's sight: a build's collections neither walk nor copy their
    # pages
    gc.freeze()
    send(control, {"ready": True, "fork_unsafe": why})
    if why:
        return 0
    served = 0
    while True:
        message, fds = receive(control)
        if message is None:
            return 0
        if message.get("op") == "start" and len(fds) == 2:
            if served == 1:
                why = preload_compiler()
                gc.freeze()
                # the launcher starts this build and the next ones plainly, with the same
                # descriptors
                if why:
                    for fd in fds:
                        os.close(fd)
                    send(control, {"fork_unsafe": why})
                    return 0
            served += 1
            if not serve_build(control, *fds):
                return 0
        else:
            for fd in fds:
                os.close(fd)


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
