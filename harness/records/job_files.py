"""The job files of `gpubench fleet`: submitit keeps a job's command and its outcome as pickles,
and loading a pickle can run any code in it. So they live in a folder of this user's alone — never
in the results store, which a team shares — and are loaded only from a folder that no one else can
write. The outcome the fleet reads back is unpickled with no class, function or global allowed:
text and tuples only, so even a file that got past the checks builds nothing. Torch-free."""

from __future__ import annotations

import grp
import io
import os
import pickle
import pickletools
import pwd
import stat
from pathlib import Path

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
DIRECTORY = getattr(os, "O_DIRECTORY", 0)
NONBLOCK = getattr(os, "O_NONBLOCK", 0)
PRIVATE_MODE = 0o700
OTHERS = 0o077  # group and others: any permission at all
OTHERS_WRITE = 0o022
MAX_OUTCOME_BYTES = 64 * 2**20  # a command's captured output; more is no outcome of gpubench run's
# submitit's outcome, a pair of a word and a text, is under a dozen opcodes; 20 million memo lookups of one
# string (40 MB) cost 90 s to scan and 12 s to unpickle
MAX_OUTCOME_OPCODES = 1000
TRUST_FIX = "pass --jobs-dir with a folder only you can write (under your home, say)"


class UntrustedFile(ValueError):
    """A job file or folder someone other than this user (or root) could have written: the line names
    it, its owner and mode."""


def default_jobs_dir() -> Path:
    """~/.cache/gpubench/fleet (or under $XDG_CACHE_HOME): the user's own, and on a cluster usually
    seen by every node."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "gpubench" / "fleet"


def owner_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
         stat.S_IFBLK: "a block device", stat.S_IFLNK: "a link"}


def described(path: Path, info: os.stat_result) -> str:
    """'<path> (owner alice, mode 0777)', and what it is when neither a file nor a folder ('..., a FIFO)')."""
    kind = KINDS.get(stat.S_IFMT(info.st_mode))
    what = f"owner {owner_name(info.st_uid)}, mode {stat.S_IMODE(info.st_mode):04o}"
    return f"{path} ({what}{', ' + kind if kind else ''})"


def trusted_owner(info: os.stat_result) -> bool:
    return info.st_uid in (os.geteuid(), 0)


def others_can_replace(path: Path, info: os.stat_result) -> bool:
    """Someone else could add, rename or remove what a folder holds: it is another user's, or group- or
    world-writable without the sticky bit (with it, as /tmp, no one renames an entry that is not theirs).
    A group that is the owner's own (a user private group) is the owner."""
    writable = info.st_mode & (0o002 if own_group(path, info) else OTHERS_WRITE)
    return not trusted_owner(info) or (bool(writable) and not info.st_mode & stat.S_ISVTX)


def own_group(path: Path, info: os.stat_result) -> bool:
    """The folder's group is its owner's alone: named as the owner, with no other member — neither
    listed in /etc/group nor an account whose primary group it is (those are listed only in /etc/passwd)
    — and no ACL on the folder (with one, the group bits are the mask over the users and groups it names)."""
    try:
        group = grp.getgrgid(info.st_gid)
    except KeyError:
        return False
    owner = owner_name(info.st_uid)
    if group.gr_name != owner or not set(group.gr_mem) <= {owner}:
        return False
    if any(account.pw_gid == info.st_gid and account.pw_uid != info.st_uid for account in pwd.getpwall()):
        return False
    return not has_acl(path)


def has_acl(path: Path) -> bool:
    """Whether `path` carries a POSIX access ACL (Linux; elsewhere, or on a file system without them: no)."""
    try:
        os.getxattr(path, "system.posix_acl_access")
    except (OSError, AttributeError):  # ENODATA: none; ENOTSUP: none on this file system; no getxattr: not Linux
        return False
    return True


def chain(folder: Path) -> list[Path]:
    """`folder` and every folder above it, as given and with links resolved (a link's target has folders of its own)."""
    paths: list[Path] = []
    for start in (folder.absolute(), folder.resolve()):
        paths += [path for path in (start, *start.parents) if path not in paths]
    return paths


def check_folder(folder: Path, what: str = "the jobs folder") -> None:
    """`folder` is this user's, open to no one else (0700), and no folder above it lets another user
    swap it: each owned by this user or root and writable by no one else, unless sticky."""
    info = os.stat(folder)
    if not trusted_owner(info) or info.st_mode & OTHERS:
        raise UntrustedFile(f"{what} {described(folder, info)} is open to other users, and gpubench loads the job "
                            f"files kept there as code — chmod 700 it, or {TRUST_FIX}")
    check_above(folder, what)


def check_above(folder: Path, what: str = "the jobs folder") -> None:
    """No folder above `folder` lets another user swap it (check_folder's second rule)."""
    for above in chain(folder)[1:]:
        info = os.stat(above)
        if others_can_replace(above, info):
            raise UntrustedFile(f"{described(above, info)}, above {what} {folder}, lets another user replace what "
                                f"it holds, and gpubench loads the job files kept below it as code — {TRUST_FIX}")


def private_folder(folder: Path, what: str = "the jobs folder") -> Path:
    """`folder`, each missing level made 0700, then checked (check_folder)."""
    missing = [path for path in (folder, *folder.parents) if not path.exists()]
    for path in reversed(missing):
        try:
            path.mkdir(mode=PRIVATE_MODE)
        except FileExistsError:  # made meanwhile (another fleet): checked below like any other
            pass
    check_folder(folder, what)
    return folder


# What a pickle of strings, bytes, numbers, tuples, lists, sets and dicts is made of. Every other opcode
# loads a global (GLOBAL, STACK_GLOBAL, INST, EXT1/2/4: the last from copyreg's cache, which find_class
# never sees), calls one (REDUCE, OBJ, NEWOBJ, BUILD), asks for an object by id (PERSID) or a buffer.
DATA_OPCODES = frozenset({
    "PROTO", "FRAME", "STOP", "MARK", "POP", "POP_MARK", "DUP",
    "UNICODE", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "STRING", "BINSTRING", "SHORT_BINSTRING",
    "SHORT_BINBYTES", "BINBYTES", "BINBYTES8", "BYTEARRAY8", "EMPTY_SET", "ADDITEMS", "FROZENSET",
    "INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4", "FLOAT", "BINFLOAT", "NONE", "NEWTRUE", "NEWFALSE",
    "TUPLE", "EMPTY_TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "LIST", "EMPTY_LIST", "APPEND", "APPENDS",
    "DICT", "EMPTY_DICT", "SETITEM", "SETITEMS",
    "PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE", "GET", "BINGET", "LONG_BINGET",
})


def code_in(data: bytes) -> str | None:
    """Why the pickle `data` is refused before any unpickling: it could load or call code ('it refers to
    builtins.exec', 'it holds the opcode REDUCE, ...'), or it holds far more opcodes than an outcome (memo
    lookups cost a scan and an unpickling of minutes); None otherwise. A damaged pickle raises ValueError."""
    texts: list[str] = []
    for count, (opcode, arg, _) in enumerate(pickletools.genops(data)):
        if count == MAX_OUTCOME_OPCODES:
            return f"it holds over {MAX_OUTCOME_OPCODES} opcodes, where a job's outcome holds a dozen"
        if opcode.name in ("GLOBAL", "INST"):
            return f"it refers to {str(arg).replace(' ', '.')}"
        if opcode.name == "STACK_GLOBAL" and len(texts) >= 2:
            return f"it refers to {texts[-2]}.{texts[-1]}"
        if opcode.name not in DATA_OPCODES:
            return f"it holds the opcode {opcode.name}, which loads or calls code"
        if isinstance(arg, str):
            texts.append(arg)
    return None


class TextOnly(pickle.Unpickler):
    """An unpickler that imports nothing: strings, numbers, tuples, lists and dicts come back, any
    class, function or global (what makes a pickle run code) is refused."""

    def find_class(self, module: str, name: str) -> object:
        raise pickle.UnpicklingError(f"it refers to {module}.{name}")


def load_outcome(path: Path) -> tuple[str, str]:
    """submitit's ("success" | "error", text) from a job's result file, read without following a
    link, from a folder this user owns and no one else can write, below folders that still let no one
    else swap it (a chmod since the fleet began counts), and the file this user's or root's."""
    try:
        check_above(path.parent)
        dir_fd = os.open(path.parent, os.O_RDONLY | DIRECTORY | NOFOLLOW)
    except OSError as error:
        raise UntrustedFile(f"{path.parent} cannot be opened as a folder ({error.strerror}): "
                            "the job's outcome is not loaded") from None
    try:
        folder = os.fstat(dir_fd)
        if not trusted_owner(folder) or folder.st_mode & OTHERS_WRITE:
            raise UntrustedFile(f"{described(path.parent, folder)} can be written by another user: {path.name} is not "
                                f"loaded — {TRUST_FIX}")
        fd = os.open(path.name, os.O_RDONLY | NOFOLLOW | NONBLOCK, dir_fd=dir_fd)  # a FIFO there would block the open
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            others_write = info.st_mode & OTHERS_WRITE and folder.st_mode & 0o011  # the folder lets them reach it
            if not stat.S_ISREG(info.st_mode) or not trusted_owner(info) or others_write:
                raise UntrustedFile(f"{described(path, info)} is not a file of yours: not loaded — {TRUST_FIX}")
            data = handle.read(MAX_OUTCOME_BYTES + 1)
    except OSError as error:
        raise UntrustedFile(f"{path} cannot be read ({error.strerror}): the job's outcome is not loaded") from None
    finally:
        os.close(dir_fd)
    return outcome_of(path, data)


def outcome_of(path: Path, data: bytes) -> tuple[str, str]:
    """The (outcome, text) pair in `data`, or UntrustedFile naming why not."""
    if len(data) > MAX_OUTCOME_BYTES:
        raise UntrustedFile(f"{path} holds over {MAX_OUTCOME_BYTES >> 20} MiB: not the outcome of a job — not loaded")
    try:
        code = code_in(data)
        if code is not None:
            raise pickle.UnpicklingError(code)
        outcome = TextOnly(io.BytesIO(data)).load()
    except Exception as error:  # noqa: BLE001 - a damaged pickle raises many types; each is the same refusal
        raise UntrustedFile(f"{path} is not a job's outcome ({' '.join(str(error).split())}): not loaded") from None
    pair = isinstance(outcome, tuple) and len(outcome) == 2
    if not (pair and outcome[0] in ("success", "error") and isinstance(outcome[1], str)):
        raise UntrustedFile(f"{path} is not a job's outcome (submitit's pair of a word and text): not loaded")
    return outcome[0], outcome[1]
