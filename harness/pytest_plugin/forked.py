"""`ForkLauncher`: ProcessLauncher's builds forked from a fork server that imported pytest and torch
once, so a build starts in a fraction of a second, yet behaves as a plain one (the server alone may
wait for its children). Where the server cannot fork safely or does not start, builds start as plain
processes, said in one line. Torch-free."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpubench.harness.core.exits import BUILD_INTERRUPTED
from gpubench.harness.processes.launch import (
    POLL_S,
    BuildHandle,
    Job,
    ProcessLauncher,
    build_preexec,
    safe_path,
    signal_name,
)
from gpubench.harness.processes.lifetime import is_stopped, kill_group
from gpubench.harness.processes.protocol import Channel
from gpubench.harness.pytest_plugin import fork_server
from gpubench.harness.core.console import CONSOLE

# started as `python -m` with the side's own interpreter
SERVER_MODULE = fork_server.__name__
# the server's imports: seconds, more on a loaded machine or a slow file system
READY_LIMIT_S = 300.0
CLOSE_GRACE_S = 5.0
MAX_CONTROL_BYTES = 65536
# a fork takes milliseconds: a server silent this long (stopped, hung) is given up
FORK_REPLY_S = 30.0
SERVER = "its fork server"


def exit_words(code: int) -> str:
    return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit {code}"


@dataclass
class ForkServer:
    process: subprocess.Popen[bytes]
    control: socket.socket

    @classmethod
    def start(cls, env: dict[str, str] | None, python: str = sys.executable) -> ForkServer:
        """The server under `python` and `env`, which its forked builds inherit (a `gpubench ab`
        side's venv)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            # SIGTERM at the run's death: the server then ends its build as the launcher would
            # (fork_server)
            process = subprocess.Popen(
                [python, "-m", SERVER_MODULE, str(theirs.fileno())],
                env=safe_path(env),
                pass_fds=(theirs.fileno(),),
                preexec_fn=build_preexec(hold_sigint=True, death_signal=signal.SIGTERM),
            )
        finally:
            theirs.close()
        return cls(process, ours)

    def ready(self, stop: Callable[[], int] = lambda: 0) -> str:
        """'' once the server can fork builds; else why builds start as plain processes."""
        try:
            message = self.reply(READY_LIMIT_S, stop)
        except EOFError:
            return f"the fork server ended before it was ready (exit {self.process.wait()})"
        if message is None or not message.get("ready"):
            return str(
                (message or {}).get("fork_unsafe")
                or f"the fork server was not ready within {READY_LIMIT_S:.0f} s"
            )
        return str(message.get("fork_unsafe", ""))

    def reply(self, limit_s: float, stop: Callable[[], int]) -> dict[str, Any] | None:
        """The server's next message within `limit_s`; a stopped server (state T) answers nobody, so
        once `stop()` names a signal (Ctrl-C) it is given up at once ('fork_unsafe'), not waited
        out."""
        deadline_s = time.monotonic() + limit_s
        while (left_s := deadline_s - time.monotonic()) > 0:
            message = self.receive(min(left_s, POLL_S))
            if message is not None:
                return message
            if stop() and is_stopped(self.process.pid):
                return {
                    "fork_unsafe": "the fork server was stopped (state T) when "
                    f"{signal_name(stop())} came: ended"
                }
        return None

    def send(self, message: dict[str, Any], fds: tuple[int, ...] = ()) -> None:
        socket.send_fds(self.control, [json.dumps(message).encode()], list(fds))

    def receive(self, timeout_s: float | None) -> dict[str, Any] | None:
        """The server's next message; None when none came within `timeout_s`. EOFError: the server
        ended."""
        self.control.settimeout(timeout_s)
        try:
            data = self.control.recv(MAX_CONTROL_BYTES)
        except TimeoutError:
            return None
        except OSError as error:
            raise EOFError(str(error)) from None
        if not data:
            raise EOFError("the fork server ended")
        message = json.loads(data)
        return message if isinstance(message, dict) else {}

    def close(self) -> None:
        # the server leaves at the end of its socket
        self.control.close()
        # a stopped one never reads that end: no wait for it
        if is_stopped(self.process.pid):
            kill_group(self.process.pid)
        try:
            self.process.wait(CLOSE_GRACE_S)
        except subprocess.TimeoutExpired:
            kill_group(self.process.pid)
            self.process.wait()


@dataclass
class _ForkedBuild:
    """A forked build, as BuildWatch sees it: every act goes through the server (which alone reaps
    it, so its pid names no other process), except when the server is stopped: it is then continued,
    or killed with the build. Without a server, a build the run stopped before it started (a signal
    while its fork server was stopped)."""

    server: ForkServer | None
    pid: int
    code: int | None = None
    lost_why: str = ""

    def send_signal(self, signum: int) -> None:
        if self.code is None:
            # a stopped server would leave the message unread
            if signum == signal.SIGCONT:
                self.server.process.send_signal(signal.SIGCONT)
            self._tell({"op": "signal", "signum": int(signum)})

    def ended(self, within_s: float) -> bool:
        if self.code is None:
            try:
                message = self.server.receive(within_s)
            # the server died: the build goes with it (its parent-death signal)
            except EOFError:
                message = {"ended": -signal.SIGKILL}
                self.lost_why = (
                    "was lost with its fork server, which ended mid-build "
                    f"({exit_words(self.server.process.wait())})"
                )
            if message is not None and isinstance(message.get("ended"), int):
                self.code = message["ended"]
        return self.code is not None

    def kill_group(self) -> None:
        # once ended, the server killed what was left in its group before reaping it
        if self.code is not None:
            return
        if self.stopped() == SERVER:
            # the build dies with it; later builds start as plain processes
            kill_group(self.server.process.pid)
        else:
            self._tell({"op": "kill"})

    def stopped(self) -> str:
        # ended: nothing of it waits on anyone
        if self.code is not None:
            return ""
        if is_stopped(self.server.process.pid):
            return SERVER
        return "it" if is_stopped(self.pid) else ""

    def lost(self) -> str:
        return self.lost_why

    def wait(self) -> int:
        while not self.ended(1.0):
            pass
        return int(self.code if self.code is not None else -signal.SIGKILL)

    def running(self) -> bool:
        return self.code is None

    def _tell(self, message: dict[str, Any]) -> None:
        try:
            self.server.send(message)
        # the server is gone, and the build with it
        except OSError:
            pass


@dataclass
class ForkLauncher(ProcessLauncher):
    """Planned builds forked from one server, started at the first build (its `python` and
    environment) and kept for the run; a job without a plan, or every job once forking is ruled out,
    starts plainly (`who` names them)."""

    python: str = sys.executable
    who: str = "builds"
    server: ForkServer | None = None
    # why builds start as plain processes, once ruled out
    plain_why: str = ""

    def kept_pids(self) -> set[int]:
        return {self.server.process.pid} if self.server is not None else set()

    def start(self, job: Job, channel: Channel | None) -> BuildHandle:
        ruled_out = self.plain_why
        server = self._server(job.env) if channel is not None else None
        if server is None or channel is None:
            return self._plain(job, channel, self.plain_why if self.plain_why != ruled_out else "")
        try:
            server.send({"op": "start"}, fds=channel.child_fds)
            message = server.reply(FORK_REPLY_S, lambda: self.stop.signum)
            if message is None:
                message = {
                    "fork_unsafe": f"the fork server did not answer within {FORK_REPLY_S:.0f} s "
                    "(stopped? hung?): ended"
                }
        # the server died between two builds (killed alone): the rest start plainly
        except (OSError, EOFError):
            message = {"fork_unsafe": "the fork server ended"}
        # found before its second build (it has ended), or a server gone silent
        if message.get("fork_unsafe"):
            self._go_plain(str(message["fork_unsafe"]))
            return self._plain(job, channel, self.plain_why)
        channel.handed_over()
        if not isinstance(message.get("started"), int):
            raise EOFError("the fork server did not start the build")
        return _ForkedBuild(server, message["started"])

    def _plain(self, job: Job, channel: Channel | None, given_up: str = "") -> BuildHandle:
        """A plain build, unless a signal came while this start waited for the server it `given_up`:
        the run stops, and a fresh interpreter would only start to be interrupted."""
        if self.stop.signum and given_up:
            # ended and named at once: no server, no process (pid -1 names none of the run's
            # children)
            return _ForkedBuild(None, -1, BUILD_INTERRUPTED, f"was not started: {given_up}")
        return super().start(job, channel)

    def _server(self, env: dict[str, str] | None) -> ForkServer | None:
        if self.server is None and not self.plain_why:
            if not sys.platform.startswith("linux"):
                self._go_plain(
                    f"{sys.platform} starts processes with spawn rules: a fork of torch is unsafe "
                    "there"
                )
            else:
                self.server = ForkServer.start(env, self.python)
                if why := self.server.ready(lambda: self.stop.signum):
                    self._go_plain(why)
        return self.server

    def _go_plain(self, why: str) -> None:
        self.close()
        self.plain_why = why
        CONSOLE.note(f"{self.who} start as plain processes: {why}")

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
