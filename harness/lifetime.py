"""Child processes that never outlive their parent (Linux): a killed `gpubench run` or pytest
must not leave a build process or a torchrun launch running on, appending rows or holding ranks."""

from __future__ import annotations

import ctypes
import signal
import sys
from pathlib import Path
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


RUN_FOLDER_PREFIX = "gpubench-run-"  # gpubench run's scratch folder: gpubench-run-<pid>-<random>


def run_folder_prefix(pid: int) -> str:
    return f"{RUN_FOLDER_PREFIX}{pid}-"


def pid_alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


SWEEP_MIN_AGE_S = 60.0  # a run in another pid namespace sharing /tmp looks dead: leave young folders alone


def _ours_and_old(path: Path) -> bool:
    import os
    import time

    try:
        info = path.lstat()  # the folder itself, never a link's target
    except OSError:
        return False
    return info.st_uid == os.getuid() and time.time() - info.st_mtime > SWEEP_MIN_AGE_S  # the owner's uid: root spares others' too


def sweep_dead_run_folders(folder: Path) -> list[Path]:
    """Scratch folders of `gpubench run`s that were killed (SIGKILL leaves no chance to clean up):
    removed when their pid is gone. Returns what was removed."""
    import shutil

    removed = []
    for path in folder.glob(f"{RUN_FOLDER_PREFIX}*"):
        pid_text = path.name[len(RUN_FOLDER_PREFIX):].split("-", 1)[0]
        if (path.is_dir() and not path.is_symlink() and pid_text.isdigit() and _ours_and_old(path)
                and not pid_alive(int(pid_text))):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
