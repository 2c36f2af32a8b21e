"""Every file gpubench writes, or a report reads, in folders others can write to (a shared store,
/tmp). Writing: files are made relative to a folder descriptor opened without following links;
temporaries get random O_EXCL names inside it and are renamed over (never through) a planted link.
Reading: O_NOFOLLOW|O_NONBLOCK, fstat-checked kind and size before any byte, JSON depth bounded; a
refusal is one line (RefusedPath), never a hang."""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import re
import secrets
import stat
from collections.abc import Iterator
from itertools import accumulate
from pathlib import Path
from typing import IO

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
DIRECTORY = getattr(os, "O_DIRECTORY", 0)
NONBLOCK = getattr(os, "O_NONBLOCK", 0)
# Narrowed by the umask: no file is writable by others or executable, no folder world-writable; a
# team's store takes the group's new files in its folders (docs/usage.md, a store shared by a team).
NEW_FILE_MODE = 0o644
NEW_FOLDER_MODE = 0o775


class RefusedPath(OSError):
    """A path gpubench will not go through: a link where it writes or reads, a file that is not
    regular, too large or nested too deep. Made from a whole line, or from the path and why; str()
    is the one line naming it and the fix."""

    def __init__(self, path_or_line: Path | str, why: str = "") -> None:
        self.line = f"{path_or_line}: {why}" if why else str(path_or_line)
        super().__init__(self.line)
        self.filename = str(path_or_line) if why else None

    def __str__(self) -> str:
        return self.line


def link_target(path: Path | str) -> str:
    try:
        return os.readlink(path)
    # gone, or no longer a link
    except OSError:
        return "?"


def link_line(path: Path, what: str, fix: str) -> str:
    """'<what> <path> is a symbolic link (to <target>) — <fix>'."""
    return (
        f"{what} {path} is a symbolic link (to {link_target(path)}); gpubench does not write "
        f"through links — {fix}"
    )


def refuse_link(path: Path, what: str, fix: str) -> None:
    """RefusedPath, one line naming `what` and `fix`, when `path` itself is a link (dangling or
    not): the one rule for every folder gpubench writes into (--results-dir, --store, --jobs-dir,
    --out), checked before anything is made."""
    if path.is_symlink():
        raise RefusedPath(link_line(path, what, fix))


def make_folder(path: Path, what: str, fix: str) -> None:
    """Create `path` (and its parents); a link at `path` itself is refused, not followed."""
    refuse_link(path, what, fix)
    make_folders(path)


def make_folders(path: Path) -> None:
    """Each missing folder down to `path`, NEW_FOLDER_MODE under the umask (Path.mkdir's parents are
    0777). Inside a setgid, sticky folder (a team's store) a new one also takes the sticky bit and
    the parent's group permissions: a member with umask 077 must not make it theirs alone, and none
    may remove another's runs."""
    if path.exists() and not path.is_dir():
        raise FileExistsError(errno.EEXIST, "File exists", str(path))
    missing = [folder for folder in (path, *path.parents) if not folder.exists()]
    for folder in reversed(missing):
        try:
            os.mkdir(folder, NEW_FOLDER_MODE)
        except FileExistsError:
            # a dangling link
            if not folder.is_dir():
                raise
            # made meanwhile by another run: its maker set its bits
            continue
        parent = os.stat(folder.parent).st_mode
        if parent & stat.S_ISGID and parent & stat.S_ISVTX:
            os.chmod(
                folder, stat.S_IMODE(os.stat(folder).st_mode) | stat.S_ISVTX | (parent & 0o070)
            )


@contextlib.contextmanager
def folder_fd(path: Path, what: str, fix: str) -> Iterator[int]:
    """A descriptor of the existing folder `path`, opened without following a link."""
    try:
        fd = os.open(path, os.O_RDONLY | DIRECTORY | NOFOLLOW)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR) and path.is_symlink():
            raise RefusedPath(link_line(path, what, fix)) from None
        raise
    try:
        yield fd
    finally:
        os.close(fd)


def _temporary(dir_fd: int, name: str) -> tuple[int, str]:
    """A new file with a random name beside `name` (O_EXCL: never an existing file or link)."""
    for _ in range(100):
        temp = f".{name[:200]}.{secrets.token_hex(8)}.partial"
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW
            return os.open(temp, flags, NEW_FILE_MODE, dir_fd=dir_fd), temp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", name)


def write_all(fd: int, data: bytes) -> None:
    """os.write may write part of the buffer (a full disk, a signal): loop until all of it is
    out."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


@contextlib.contextmanager
def replacing(folder: Path, name: str, what: str, fix: str, text: bool = False) -> Iterator[IO]:
    """A file to write `folder/name` through: a temporary, fsynced and renamed over `name` (a link
    there is replaced, its target untouched) when the block succeeds, removed when it raises.
    Readers never see half a file."""
    with folder_fd(folder, what, fix) as dir_fd:
        fd, temp = _temporary(dir_fd, name)
        try:
            raw = os.fdopen(fd, "wb", buffering=0)
            handle = (
                io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8", newline="")
                if text
                else raw
            )
            try:
                yield handle
                handle.flush()
                os.fsync(fd)
            finally:
                # closes `raw` too
                handle.close()
            os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=dir_fd)
            raise


def replace_bytes(folder: Path, name: str, data: bytes, what: str, fix: str) -> Path:
    """`folder/name` holds `data`, whole or not at all (see `replacing`)."""
    with replacing(folder, name, what, fix) as handle:
        write_all(handle.fileno(), data)
    return folder / name


def create_whole(folder: Path, name: str, data: bytes, what: str, fix: str) -> bool:
    """`folder/name` made anew (O_EXCL) holding `data`, inside `folder` opened without following a
    link; False when a file is there already (kept). A write cut short (a full disk) removes the
    file: no reader sees half of it."""
    with folder_fd(folder, what, fix) as dir_fd:
        try:
            fd = os.open(
                name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, NEW_FILE_MODE, dir_fd=dir_fd
            )
        except FileExistsError:
            return False
        try:
            write_all(fd, data)
            os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=dir_fd)
            raise
        finally:
            os.close(fd)
    return True


def probe(folder: Path, what: str, fix: str) -> None:
    """`folder` takes a new file: one with a random name is made there and removed at once."""
    with folder_fd(folder, what, fix) as dir_fd:
        fd, temp = _temporary(dir_fd, "gpubench-write-test")
        os.close(fd)
        os.unlink(temp, dir_fd=dir_fd)


def _open(path: Path, flags: int, what: str, fix: str, mode: int = NEW_FILE_MODE) -> int:
    """os.open never through a link at `path`: one there (O_NOFOLLOW's ELOOP, O_EXCL's EEXIST) is
    named."""
    try:
        return os.open(path, flags | NOFOLLOW, mode)
    except OSError as error:
        if error.errno == errno.ELOOP or path.is_symlink():
            raise RefusedPath(link_line(path, what, fix)) from None
        raise


def open_new(path: Path, what: str, fix: str, mode: int = NEW_FILE_MODE) -> int:
    """A descriptor of the new file `path` (O_EXCL: never an existing file)."""
    return _open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, what, fix, mode)


def open_append(path: Path, what: str, fix: str) -> int:
    """A descriptor appending to the existing file `path`."""
    return _open(path, os.O_WRONLY | os.O_APPEND, what, fix)


def open_read(path: Path, what: str, fix: str) -> IO[bytes]:
    """`path` for reading (a file gpubench is about to append to)."""
    return os.fdopen(_open(path, os.O_RDONLY, what, fix), "rb")


# ---- reading ------------------------------------------------------------------------------------

# gpubench's JSON files nest at most 5 levels; json's parser recurses once per level
MAX_JSON_DEPTH = 32
KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
    stat.S_IFLNK: "a symbolic link",
}


def mib(size_bytes: int) -> str:
    return f"{size_bytes / 2**20:.3g} MiB"


def kind_refusal(path: Path | str, mode: int) -> RefusedPath | None:
    """Why a file of this mode is not read (None for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISLNK(mode):
        return RefusedPath(
            path,
            f"a symbolic link (to {link_target(path)}), not followed when reading — "
            "replace the link with the file itself",
        )
    kind = KINDS.get(stat.S_IFMT(mode), "not a regular file")
    return RefusedPath(
        path,
        f"{kind}, not a regular file (gpubench reads regular files only) — "
        "move it out of the folder",
    )


def not_own(path: Path | str, status: os.stat_result) -> RefusedPath | None:
    """Why a file is not the user's own to trust (another owner, or writable by others), or None."""
    if status.st_uid != os.geteuid():
        return RefusedPath(path, f"owned by uid {status.st_uid}, not by you (uid {os.geteuid()})")
    if status.st_mode & 0o022:
        return RefusedPath(path, f"writable by others (mode {stat.filemode(status.st_mode)})")
    return None


def read_regular(path: Path | str, max_bytes: int, what: str = "file", own: bool = False) -> bytes:
    """The bytes of the regular file `path`, at most `max_bytes`: no link followed, no FIFO or
    device waited on (the descriptor's own fstat checks a file swapped in since the look), size
    checked before reading (a 2 GB sparse stray costs nothing). `own`: refused unless the user owns
    it and no one else can write it (a planted cache)."""
    problem = kind_refusal(path, os.lstat(path).st_mode)
    if problem is not None:
        raise problem
    try:
        fd = os.open(path, os.O_RDONLY | NOFOLLOW | NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        # a link put there since the look
        if error.errno == errno.ELOOP:
            raise kind_refusal(path, stat.S_IFLNK) from None
        raise
    status = os.fstat(fd)
    too_large = RefusedPath(
        path,
        f"{status.st_size:,} bytes, above the {mib(max_bytes)} a {what} may be — "
        "move it out of the folder",
    )
    problem = (
        kind_refusal(path, status.st_mode)
        or (too_large if status.st_size > max_bytes else None)
        or (not_own(path, status) if own else None)
    )
    if problem is not None:
        os.close(fd)
        raise problem
    # only now is anything read
    with os.fdopen(fd, "rb", buffering=0) as handle:
        # a buffer of the file's size, not of the limit; a file that grows while read stops at the
        # limit too
        data = handle.read(min(status.st_size, max_bytes) + 1)
        if len(data) > status.st_size:
            data += handle.read(max_bytes + 1 - len(data))
    if len(data) > max_bytes:
        raise too_large
    return data


STRINGS_AND_TEXT = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[^\[\]{}"]+')
DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def json_depth(text: str) -> int:
    """How deep JSON text nests (brackets in strings aside), found before json's parser, whose
    RecursionError would come at a depth set by the caller's stack (about 1000 levels, not
    MAX_JSON_DEPTH) and name none."""
    # a quote left: a string that never ends
    brackets = STRINGS_AND_TEXT.sub("", text).replace('"', "")
    return max(accumulate(map(DEPTH_STEP.__getitem__, brackets)), default=0)


def read_json(
    path: Path | str, max_bytes: int, what: str = "JSON file", own: bool = False
) -> object:
    """The JSON value of `path` (read_regular); RefusedPath past MAX_JSON_DEPTH, ValueError for
    non-UTF-8 JSON."""
    text = read_regular(path, max_bytes, what, own).decode("utf-8")
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise RefusedPath(
            path,
            f"JSON nested {depth} levels deep (gpubench reads at most {MAX_JSON_DEPTH}) — "
            "move it out of the folder",
        )
    return json.loads(text)
