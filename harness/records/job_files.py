"""`gpubench fleet`'s job files: submitit pickles a job's command, and loading a pickle can run any
code. So they live in a folder of this user's alone (never the team's store), checked before each
submission."""

from __future__ import annotations

import grp
import os
import pwd
import stat
from pathlib import Path

from gpubench.harness.core.exits import UsageError
from gpubench.harness.records.safe_files import KINDS

PRIVATE_MODE = 0o700
# group and others: any permission at all
OTHERS = 0o077
OTHERS_WRITE = 0o022
TRUST_FIX = "pass --jobs-dir with a folder only you can write (under your home, say)"


def default_jobs_dir() -> Path:
    """~/.cache/gpubench/fleet (or under $XDG_CACHE_HOME): the user's own, and usually seen by every
    node."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "gpubench" / "fleet"


def owner_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def described(path: Path, info: os.stat_result) -> str:
    """'<path> (owner alice, mode 0777)', and what it is when neither a file nor a folder ('..., a
    FIFO)')."""
    kind = None if stat.S_ISDIR(info.st_mode) else KINDS.get(stat.S_IFMT(info.st_mode))
    what = f"owner {owner_name(info.st_uid)}, mode {stat.S_IMODE(info.st_mode):04o}"
    return f"{path} ({what}{', ' + kind if kind else ''})"


def trusted_owner(info: os.stat_result) -> bool:
    return info.st_uid in (os.geteuid(), 0)


def others_can_write(path: Path, info: os.stat_result) -> bool:
    """Users other than the owner could add, rename or remove what a folder holds: group- or
    world-writable without the sticky bit (a user private group counts as the owner)."""
    writable = info.st_mode & (0o002 if own_group(path, info) else OTHERS_WRITE)
    return bool(writable) and not info.st_mode & stat.S_ISVTX


def own_group(path: Path, info: os.stat_result) -> bool:
    """The group is its owner's alone: named as the owner, no other member in /etc/group nor as a
    primary group in /etc/passwd, and no ACL (with one, the group bits are a mask over the users and
    groups it names)."""
    try:
        group = grp.getgrgid(info.st_gid)
    except KeyError:
        return False
    owner = owner_name(info.st_uid)
    if group.gr_name != owner or not set(group.gr_mem) <= {owner}:
        return False
    if any(
        account.pw_gid == info.st_gid and account.pw_uid != info.st_uid
        for account in pwd.getpwall()
    ):
        return False
    try:
        os.getxattr(path, "system.posix_acl_access")
    # ENODATA: none; ENOTSUP: none on this file system; no getxattr: not Linux
    except (OSError, AttributeError):
        # no ACL
        return True
    return False


def chain(folder: Path) -> list[Path]:
    """`folder` and every folder above it, as given and with links resolved."""
    paths: list[Path] = []
    for start in (folder.absolute(), folder.resolve()):
        paths += [path for path in (start, *start.parents) if path not in paths]
    return paths


def check_folder(folder: Path, what: str = "the jobs folder") -> None:
    """`folder` is this user's alone (0700) and no folder above lets another user swap it; checked
    again before each job, since a chmod may come meanwhile."""
    info = os.stat(folder)
    if not trusted_owner(info) or info.st_mode & OTHERS:
        raise UsageError(
            f"{what} {described(folder, info)} is open to other users, and gpubench loads the job "
            f"files kept there as code — chmod 700 it, or {TRUST_FIX}"
        )
    for above in chain(folder)[1:]:
        info = os.stat(above)
        if not trusted_owner(info) or others_can_write(above, info):
            raise UsageError(
                f"{described(above, info)}, above {what} {folder}, lets another user replace what "
                f"it holds, and gpubench loads the job files kept below it as code — {TRUST_FIX}"
            )


def private_folder(folder: Path, what: str = "the jobs folder") -> Path:
    """`folder`, each missing level made 0700, then checked (check_folder)."""
    missing = [path for path in (folder, *folder.parents) if not path.exists()]
    for path in reversed(missing):
        try:
            path.mkdir(mode=PRIVATE_MODE)
        # made meanwhile (another fleet): checked below like any other
        except FileExistsError:
            pass
    check_folder(folder, what)
    return folder
