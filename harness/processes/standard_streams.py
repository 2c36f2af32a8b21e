"""Standard streams a run cannot lose to: a descriptor 0-2 closed at start is opened on /dev/null
(else the next file opened, the run's CSV say, would take its number), and a stdout whose write
fails (`| head`, a full disk) goes to /dev/null with one line on stderr while the run measures on; a
stderr whose write fails (`2>/dev/full`) goes there too, so a refusal keeps its own exit code.
Torch-free."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, TextIO

from gpubench.harness.core.console import CONSOLE


class _DroppedOnFailure:
    """sys.stdout that stops printing at its first failed write instead of raising through pytest or
    a table."""

    def __init__(self, stream: TextIO, said: bool = True) -> None:
        self._stream = stream
        self.lost = ""
        # stdout's loss is said on stderr; stderr's own has nowhere to be said
        self._said = said

    def write(self, text: str) -> int:
        if not self.lost:
            try:
                return self._stream.write(text)
            except OSError as error:
                self._drop(error)
        return len(text)

    def flush(self) -> None:
        if not self.lost:
            try:
                self._stream.flush()
            except OSError as error:
                self._drop(error)

    def _drop(self, error: OSError) -> None:
        self.lost = error.strerror or str(error)
        with contextlib.suppress(OSError, ValueError):
            null = os.open(os.devnull, os.O_WRONLY)
            # what is still buffered, and any child's output, goes nowhere
            os.dup2(null, self._stream.fileno())
            os.close(null)
        if not self._said:
            return
        with contextlib.suppress(OSError, ValueError):
            CONSOLE.note(
                f"standard output cannot be written ({self.lost}): printing stops, the run goes on"
            )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard_standard_streams() -> None:
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            # a non-blocking stdout (a reader's pipe) fails a write when full: output was cut
            # without a word
            if fd:
                os.set_blocking(fd, True)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            # os.open makes it close-on-exec: the builds must get it too
            os.set_inheritable(fd, True)
    # Python starts with None for a descriptor closed at start
    if sys.stdout is None:
        # the process's own descriptor, kept open for the process's life
        sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)
    if sys.stderr is None:
        sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False)
    if not isinstance(sys.stdout, _DroppedOnFailure):
        sys.stdout = _DroppedOnFailure(sys.stdout)  # type: ignore[assignment]
    # stderr on a full disk: the exit code still says what happened
    if not isinstance(sys.stderr, _DroppedOnFailure):
        sys.stderr = _DroppedOnFailure(sys.stderr, said=False)  # type: ignore[assignment]
