"""A `gpubench ab` pair's builds take turns case by case, so a case's A and B timings are back to
back (the speed of a shared machine drifts within seconds), in the order F0 S0 S1 F1 F2 S2 S3 F3 ...
so going second cancels out. Tokens over two named pipes: "go", "ready", "done", "free" (the
partner's process ended); after the last two a build runs alone. Torch-free."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

GO, READY, DONE, FREE = "go", "ready", "done", "free"
# The session's pid, in both builds' environment: the partner holds a CUDA context of its own while
# it waits its turn, idle, and the busy-GPU check (gpubench.harness.devices.env) must not count it
# as another job.
SESSION_PID_ENV = "GPUBENCH_PAIR_SESSION_PID"


@dataclass(frozen=True)
class TurnPlan:
    first: bool
    take_path: str
    give_path: str

    def to_text(self) -> str:
        return json.dumps({"first": self.first, "take": self.take_path, "give": self.give_path})

    @classmethod
    def from_text(cls, text: str) -> TurnPlan:
        data = json.loads(text)
        return cls(bool(data["first"]), str(data["take"]), str(data["give"]))


def takes_before(first: bool, case: int) -> bool:
    """F takes the baton before its odd cases, S before its even ones (F0 S0 S1 F1 F2 S2 ...)."""
    return case % 2 == (1 if first else 0)


def gives_after(first: bool, case: int) -> bool:
    """F gives the baton after its even cases, S after its odd ones."""
    return case % 2 == (0 if first else 1)


@dataclass
class Turns:
    """A build's side of the baton."""

    plan: TurnPlan
    take_fd: int = -1
    give_fd: int = -1
    partner_active: bool = True
    buffer: bytearray = field(default_factory=bytearray)

    # the session holds both pipes open read-write: neither open blocks, no write fails
    def open(self) -> Turns:
        self.take_fd = os.open(self.plan.take_path, os.O_RDONLY)
        self.give_fd = os.open(self.plan.give_path, os.O_WRONLY)
        return self

    def ready(self) -> None:
        """Collected: tell the partner, and wait until it collected too (or ended)."""
        self._give(READY)
        self._wait_for(READY)

    def before(self, case: int) -> None:
        if takes_before(self.plan.first, case):
            self._wait_for(GO)

    def after(self, case: int) -> None:
        if gives_after(self.plan.first, case):
            self._give(GO)

    def finish(self, wait: bool = True) -> None:
        """After the last case: the partner runs alone from here; with `wait`, until it has finished
        too."""
        self._give(DONE)
        if wait:
            self._wait_for(DONE)
        for fd in (self.take_fd, self.give_fd):
            if fd >= 0:
                os.close(fd)
        self.take_fd = self.give_fd = -1

    def _give(self, token: str) -> None:
        if self.give_fd >= 0:
            os.write(self.give_fd, f"{token}\n".encode())

    def _wait_for(self, token: str) -> None:
        """Until `token` comes, or the partner is done or gone (then this build runs alone)."""
        while self.partner_active:
            got = self._next()
            if got in (DONE, FREE, ""):
                self.partner_active = False
            elif got == token:
                break

    def _next(self) -> str:
        """The next token; '' at the pipe's end (the session closed it)."""
        while b"\n" not in self.buffer:
            chunk = os.read(self.take_fd, 64)
            if not chunk:
                return ""
            self.buffer += chunk
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer = bytearray(rest)
        return line.decode(errors="replace").strip()


@dataclass
class PairPipes:
    """The session's side: a named pipe into each build, held open read-write for the pair, so a
    build's open never blocks, its writes never fail, and a token left over dies with the pair."""

    folder: str
    pair: int
    names: tuple[str, str]
    fds: dict[str, int] = field(default_factory=dict)

    def path(self, side: str) -> str:
        return os.path.join(self.folder, f"pair{self.pair}-{side}")

    def open(self) -> PairPipes:
        for side in self.names:
            os.mkfifo(self.path(side), 0o600)
            self.fds[side] = os.open(self.path(side), os.O_RDWR | os.O_NONBLOCK)
        return self

    def plan(self, side: str, first: bool) -> TurnPlan:
        other = self.names[1] if side == self.names[0] else self.names[0]
        return TurnPlan(first, self.path(side), self.path(other))

    def free(self, side: str) -> None:
        """`side`'s partner ended: `side` runs alone from now on."""
        try:
            os.write(self.fds[side], f"{FREE}\n".encode())
        # a full pipe holds tokens enough: the build is not waiting
        except OSError:
            pass

    def close(self) -> None:
        for side, fd in self.fds.items():
            os.close(fd)
            os.unlink(self.path(side))
        self.fds.clear()
