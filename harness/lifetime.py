"""Child processes that never outlive their parent (Linux): a killed `gpubench run` or pytest
must not leave a build process or a torchrun launch running on, appending rows or holding ranks."""

from __future__ import annotations

import ctypes
import signal
import sys
from typing import Callable

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In the child, before exec: the kernel sends SIGTERM when the parent dies (even by SIGKILL)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux/glibc: the parent's own handlers still forward signals
        pass


def child_preexec() -> Callable[[], None] | None:
    """The preexec_fn for subprocess on Linux, else None."""
    return die_with_parent if sys.platform.startswith("linux") else None
