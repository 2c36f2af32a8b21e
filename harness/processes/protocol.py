"""The messages between `gpubench run` and a build: the `BuildPlan` in, the `BuildAnswer` back, each
one JSON line. A build answers twice, once its collection knows the build count (so a build that
dies later still tells it) and at its end; the last whole line counts. Torch-free."""

from __future__ import annotations

import json
import os
import threading
from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypeVar

from gpubench.harness.core.options import RunOptions, kind_mismatch

# far above a plan or an answer: a longer message is a fault, not data
MAX_MESSAGE_BYTES = 4 * 1024 * 1024


class ProtocolError(ValueError):
    pass


Message = TypeVar("Message", bound="JsonLine")


class JsonLine:
    """A message as one JSON line, read back field by field checked (ProtocolError)."""

    def to_json(self) -> str:
        return json.dumps(asdict(self))  # type: ignore[call-overload]

    @classmethod
    def from_json(cls: type[Message], text: str) -> Message:
        return _typed(cls, text)


@dataclass(frozen=True)
class BuildPlan(JsonLine):
    """What a build process is asked to do. The launcher sends it; in the build it is registered
    with pytest as a plugin object, where the gpubench plugin finds it
    (`pytest_plugin.build_answer.plan_of`)."""

    # which build of every case this process runs, from 0
    build: int
    # the user's, passed to pytest untouched
    pytest_args: list[str]
    # pytest's command line for the suite: its folder or the user's tests, config, plugins
    suite_args: list[str]
    # the run options as the command read them, once
    run: RunOptions = RunOptions()
    # build processes the selection needs, once the first build told it
    builds: int | None = None
    # put in the names of the user's --benchmark-json/--benchmark-save ('b2'); '' keeps them
    output_tag: str = ""
    # pytest-benchmark's JSON goes here when the user names none
    table_json: str = ""
    # the micro cases only: the user's -m and-ed with their markers
    micro_only: bool = False
    # a build past the profile's, with the budget's time left: noisiest repeated cases first
    extra: bool = False
    # a `gpubench ab` build that takes turns with its partner (gpubench.harness.processes.turns)
    turns: str = ""
    # the run's end by the wall clock under a budget, the same for every build
    deadline_s: float | None = None
    # a `gpubench ab` build: the file of the cases still undecided (processes.cases_file)
    cases: str = ""
    # set in the build: where its answer goes (never sent)
    answer_fd: int | None = None

    # pluggy keeps plugin objects in a set; the lists make the fields unhashable
    def __hash__(self) -> int:
        return id(self)


@dataclass(frozen=True)
class BuildAnswer(JsonLine):
    build: int
    # the selection's build count, once collected
    builds: int | None = None
    rows_written: int = 0
    # pytest's test id -> setup + call + teardown seconds
    case_cost_s: dict[str, float] = field(default_factory=dict)
    # the session's status as pytest left it; None before the session ended
    exit_code: int | None = None
    # the pytest-benchmark JSON this build wrote, '' for none
    benchmark_json: str = ""
    # the user asked pytest-benchmark for its verbose table
    verbose_table: bool = False
    # from this process's start (its fork) to its first case's setup
    startup_s: float | None = None
    notes: list[str] = field(default_factory=list)
    # the test id of the case it has started, in an answer sent at its setup: a build cut mid-case
    case: str = ""
    # the budget plan's headline case ids funded whole, and those it left out (the first build's,
    # once planned)
    promised: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)


def _typed(cls: type[Message], text: str) -> Message:
    try:
        data: Any = json.loads(text)
    except ValueError as error:
        raise ProtocolError(f"not JSON: {error}") from None
    if not isinstance(data, dict):
        raise ProtocolError(f"a {cls.__name__} is a JSON object, got {type(data).__name__}")
    known = {f.name: f for f in fields(cls)}
    if unknown := sorted(set(data) - set(known)):
        raise ProtocolError(f"{cls.__name__}: unknown field {unknown[0]!r}")
    for name, value in data.items():
        if problem := kind_mismatch(cls.__name__, name, known[name].type, value):
            raise ProtocolError(problem)
    try:
        if "run" in data:
            data["run"] = RunOptions.from_dict(data["run"])
        return cls(**data)
    # a field without a default left out; run options of the wrong kind
    except (TypeError, ValueError) as error:
        raise ProtocolError(f"{cls.__name__}: {error}") from None


def write_message(fd: int, message: BuildPlan | BuildAnswer) -> None:
    """One line, written whole (a write may take part of it)."""
    data = (message.to_json() + "\n").encode()
    while data:
        data = data[os.write(fd, data) :]


def read_plan(fd: int) -> BuildPlan:
    """The plan from a pipe, read to its end (the launcher closes its side once written)."""
    with os.fdopen(fd, "rb") as pipe:
        return BuildPlan.from_json(pipe.read(MAX_MESSAGE_BYTES).decode())


def last_answer(data: bytes) -> BuildAnswer | None:
    """The last whole answer line a build wrote; None when it died before its collection."""
    for line in reversed(data.decode(errors="replace").splitlines()):
        try:
            return BuildAnswer.from_json(line)
        except ProtocolError:
            continue
    return None


@dataclass
class Channel:
    """One build's pipes, each served by a thread: the plan in (a pipe holds 64 KiB), the answer out
    (so a long answer never blocks the build). `child_fds` go to the build and are closed here once
    it holds them (`handed_over`)."""

    plan: BuildPlan
    # (plan read end, answer write end)
    child_fds: tuple[int, int] = (-1, -1)
    received: bytearray = field(default_factory=bytearray)
    threads: list[threading.Thread] = field(default_factory=list)

    def open(self) -> Channel:
        plan_read, plan_write = os.pipe()
        answer_read, answer_write = os.pipe()
        self.child_fds = (plan_read, answer_write)
        self.threads = [
            threading.Thread(target=_write_and_close, args=(plan_write, self.plan), daemon=True),
            threading.Thread(target=_drain, args=(answer_read, self.received), daemon=True),
        ]
        for thread in self.threads:
            thread.start()
        return self

    def build_args(self) -> list[str]:
        return [f"--plan-fd={self.child_fds[0]}", f"--answer-fd={self.child_fds[1]}"]

    def handed_over(self) -> None:
        for fd in self.child_fds:
            if fd >= 0:
                os.close(fd)
        self.child_fds = (-1, -1)

    def answer(self, wait_s: float = 1.0) -> BuildAnswer | None:
        """What the ended build answered; a process it left holding the pipe is not waited for
        beyond `wait_s`."""
        self.handed_over()
        for thread in self.threads:
            thread.join(wait_s)
        return last_answer(bytes(self.received))


def _write_and_close(fd: int, plan: BuildPlan) -> None:
    try:
        write_message(fd, plan)
    # the build ended before reading it: its exit says why
    except BrokenPipeError:
        pass
    finally:
        os.close(fd)


def _drain(fd: int, into: bytearray) -> None:
    with os.fdopen(fd, "rb") as pipe:
        for chunk in iter(lambda: pipe.read1(65536), b""):
            if len(into) < MAX_MESSAGE_BYTES:
                into += chunk
