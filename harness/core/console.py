"""The one console of a gpubench process.

Every line gpubench shows a person goes through `CONSOLE`: its voice (the `gpubench:` a line begins
with), its stream (a result on stdout, a refusal or a note on stderr) and the screen it lands on are
decided here and nowhere else. Outside pytest the screen is the standard streams; inside a build the
pytest plugin attaches pytest's terminal reporter, so the plugin's lines and pytest's own keep their
order. Torch-free.
"""

from __future__ import annotations

import sys
from typing import Protocol, TextIO

VOICE = "gpubench"


class Screen(Protocol):
    """Where the lines of standard output land."""

    def line(self, text: str) -> None: ...

    def live(self, text: str) -> None: ...


class StandardStreams:
    """Standard output, looked up at each write (pytest's capture and the guarded streams replace
    it)."""

    def line(self, text: str) -> None:
        write_flushed(sys.stdout, text + "\n")

    def live(self, text: str) -> None:
        # Off pytest's terminal there is no line to rewrite: a live line stays like any other.
        self.line(text)


def write_flushed(stream: TextIO, text: str) -> None:
    stream.write(text)
    stream.flush()


class Console:
    """The one writer of a process's console lines."""

    def __init__(self) -> None:
        self.voice = VOICE
        self.screen: Screen = StandardStreams()

    def speak_as(self, voice: str) -> None:
        """The name a command's lines begin with: `gpubench ab`, `gpubench fleet`."""
        self.voice = voice

    def attach(self, screen: Screen) -> None:
        self.screen = screen

    def detach(self) -> None:
        self.screen = StandardStreams()

    def show(self, text: str) -> None:
        """Lines as they are, on standard output: a table, a report, JSON."""
        for line in text.split("\n"):
            self.screen.line(line)

    def live(self, text: str) -> None:
        """The line a terminal rewrites in place (a case's progress)."""
        self.screen.live(text)

    def say(self, text: str) -> None:
        """A line of the run's own, in its voice, on standard output."""
        self.show(f"{self.voice}: {text}")

    def note(self, text: str) -> None:
        """A line in the run's voice on standard error: what happened beside the results."""
        self.show_error(f"{self.voice}: {text}")

    def warn(self, text: str) -> None:
        self.note(f"warning: {text}")

    def error(self, text: str) -> None:
        """The one line of a refusal; its text names the fix."""
        self.note(f"error: {text}")

    def show_error(self, text: str) -> None:
        """Text as it is, on standard error: a child's held output, a line already in its voice."""
        write_flushed(sys.stderr, text if text.endswith("\n") else text + "\n")


CONSOLE = Console()
