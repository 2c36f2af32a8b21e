"""A report folder appears whole or not at all, written by one report at a time: `--out DIR` is
written into a hidden `.DIR.<random>.partial` and renamed into place (a previous report moved aside
as `.DIR.<random>.old`, then removed), under a flock on `.DIR.lock`. DIR is replaced whole, so it
must be new, empty, or a previous report. Hidden names keep the temporaries out of every folder walk
(gpubench.reports.judge.load)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

from gpubench.harness.records.safe_files import (
    NEW_FILE_MODE,
    NEW_FOLDER_MODE,
    NOFOLLOW,
    NONBLOCK,
    RefusedPath,
    kind_refusal,
    link_line,
    make_folders,
)
from gpubench.reports.judge.load import OUT_FIX
from gpubench.harness.core.exits import UsageError

# all a report writes
REPORT_FILES = re.compile(r"report\.md|merged\.csv|[^/]+\.png")
# `.{name}.{16 hex}.partial` stays under a file system's 255 bytes
MAX_STEM_CHARS = 200


def check_out(out: Path) -> None:
    """Refuse, before anything is written, an --out that is a link, a file, or a folder holding what
    a report does not write."""
    if not out.name:
        raise UsageError(
            f"--out {out} names no folder of its own — pass a new folder for the report"
        )
    if out.is_symlink():
        raise RefusedPath(link_line(out, "report folder", OUT_FIX))
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file, not a folder — pass a new folder for the report")
    foreign = sorted(
        name for name in (os.listdir(out) if out.is_dir() else []) if not _report_entry(out / name)
    )
    if foreign:
        more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
        raise UsageError(
            f"--out {out} holds {foreign[0]}{more}, which a report does not write: the report "
            "replaces the folder whole — pass a new or empty folder, or a previous report's"
        )


def _report_entry(path: Path) -> bool:
    """Whether `path` is something a report writes (a link at such a name is removed, never
    followed)."""
    return REPORT_FILES.fullmatch(path.name) is not None and (path.is_symlink() or path.is_file())


@contextlib.contextmanager
def report_folder(out: Path) -> Iterator[Path]:
    """A new, empty folder beside `out` that becomes `out` when the block ends without an error, and
    is removed when it raises (Ctrl-C included)."""
    out = Path(os.path.abspath(out))
    check_out(out)
    make_folders(out.parent)
    with _lock(out):
        _sweep(out)
        temp = _new_folder(out, "partial")
        try:
            yield temp
            _publish(temp, out)
        except BaseException:
            shutil.rmtree(temp, ignore_errors=True)
            raise


def _stem(out: Path) -> str:
    return f".{out.name[:MAX_STEM_CHARS]}"


@contextlib.contextmanager
def _lock(out: Path) -> Iterator[None]:
    """Held while `out` is written: a second report into it is refused, not mixed in. One that
    locked a file just removed tries the new one."""
    path = out.parent / f"{_stem(out)}.lock"
    for _ in range(100):
        fd = _open_lock(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise UsageError(
                f"another gpubench report is writing {out} now — wait for it to finish, "
                "or pass another --out"
            ) from None
        if _same_file(fd, path):
            break
        # locked after its holder removed it: the name is free again
        os.close(fd)
    else:
        raise UsageError(f"cannot lock {path} (it keeps changing) — pass another --out")
    try:
        yield
    finally:
        # a sticky /tmp keeps another user's lock file: it is reused
        with contextlib.suppress(OSError):
            path.unlink()
        os.close(fd)


def _open_lock(path: Path) -> int:
    """The lock file, made if missing; a link, FIFO, folder or device planted at its name is refused
    (O_NONBLOCK: a FIFO is never waited on)."""
    # read-only is enough for flock: a lock file another member made can be locked by all
    try:
        flags = os.O_RDONLY | os.O_CREAT | NOFOLLOW | NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(path, flags, NEW_FILE_MODE)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise RefusedPath(link_line(path, "report lock", "remove the link")) from None
        if error.errno == errno.EISDIR:
            raise UsageError(
                f"report lock {path} is a folder, not a lock file — remove it"
            ) from None
        raise
    problem = kind_refusal(path, os.fstat(fd).st_mode)
    if problem is not None:
        os.close(fd)
        raise UsageError(f"report lock {problem}")
    return fd


def _same_file(fd: int, path: Path) -> bool:
    try:
        mine, named = os.fstat(fd), os.lstat(path)
    except FileNotFoundError:
        return False
    return (mine.st_dev, mine.st_ino) == (named.st_dev, named.st_ino)


def _new_folder(out: Path, kind: str) -> Path:
    """A new folder with a random hidden name beside `out` (mkdir never follows a planted link)."""
    for _ in range(100):
        path = out.parent / f"{_stem(out)}.{secrets.token_hex(8)}.{kind}"
        try:
            # never world-writable, whatever the umask (a team's store holds it)
            path.mkdir(NEW_FOLDER_MODE)
            return path
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(out))


def _publish(temp: Path, out: Path) -> None:
    """`temp` becomes `out`; a previous report there is moved aside first, then removed."""
    # again, just before: nothing but a report is ever moved aside
    check_out(out)
    if not os.path.lexists(out):
        os.rename(temp, out)
        return
    aside = out.parent / f"{_stem(out)}.{secrets.token_hex(8)}.old"
    os.rename(out, aside)
    os.rename(temp, out)
    _remove(aside)


def _remove(folder: Path) -> None:
    """A previous report folder: its report files, then the folder; what cannot go stays hidden (an
    NFS client's .nfs file of a report still open elsewhere) and goes with a later report."""
    with contextlib.suppress(OSError):
        for name in os.listdir(folder):
            if _report_entry(folder / name):
                (folder / name).unlink()
        folder.rmdir()


def _sweep(out: Path) -> None:
    """Leftovers of killed reports into `out` (under the lock, every such temporary is dead). One
    killed between its two renames left no `out`: the newest report moved aside is put back."""
    leftover = re.compile(re.escape(_stem(out)) + r"\.[0-9a-f]{16}\.(partial|old)")
    found = [
        (out.parent / name, match.group(1))
        for name in os.listdir(out.parent)
        if (match := leftover.fullmatch(name))
    ]
    found = [(path, kind) for path, kind in found if path.is_dir() and not path.is_symlink()]
    olds = sorted(
        (path for path, kind in found if kind == "old"), key=lambda path: path.stat().st_mtime
    )
    # killed between its renames: the previous report goes back in place
    if olds and not os.path.lexists(out):
        os.rename(olds.pop(), out)
    for path, kind in found:
        # a report's own writing
        if kind == "partial":
            shutil.rmtree(path, ignore_errors=True)
        # a previous report moved aside: its report files only
        elif path in olds:
            _remove(path)
