"""The results store, `<store>/<machine>/<run_id>.csv` plus sidecars, shareable on NFS: each run
writes only its own files and the machine folder's mkdir is safe to race. The folder is
`<hostname>-<machine_id's first 8 hex>`: new hardware under an old name starts a new history;
kernel, driver, torch and the chosen device do not."""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpubench.harness.core.exits import UsageError
from gpubench.harness.records.job_files import described, others_can_write
from gpubench.harness.records.safe_files import (
    RefusedPath,
    create_whole,
    kind_refusal,
    not_own,
    read_json,
    refuse_link,
)

# gpus: every GPU of the node
MACHINE_KEYS = ("hostname", "cpu_model", "cpu_cores", "ram_gib", "gpus")
MAX_HOST_CHARS = 40
# <store>/reports/<fleet id>/: fleet reports, beside the machines
REPORTS_FOLDER = "reports"
# the fix for a store that is a link
STORE_FIX = "pass --store with the folder itself"


def safe_name(text: str) -> str:
    """A file-system-safe form of a host name or label (letters, digits, '-', '_', '.')."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text).strip(".") or "host"


def machine_id(identity: dict[str, Any]) -> str:
    """What makes two runs one machine, written once: 12 hex digits over the host name and the
    hardware. Kernel, driver, torch and Python change without the machine changing: they are columns
    of their own, never in here."""
    text = "|".join(f"{key}={identity.get(key, '')}" for key in MACHINE_KEYS)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def machine_folder_name(identity: dict[str, Any]) -> str:
    """`<hostname>-<machine_id's first 8 hex digits>`, e.g. `gpu-node07-3fa9c2d1`."""
    return (
        f"{safe_name(str(identity.get('hostname', '')))[:MAX_HOST_CHARS]}-"
        f"{machine_id(identity)[:8]}"
    )


def results_dir_for(
    store: str | Path | None,
    results_dir: str | Path,
    default_results_dir: str,
    identity: Callable[[], dict[str, Any]],
) -> Path:
    """`<store>/<machine>/` with --store (identity read here), else --results-dir; both at once is
    refused."""
    if store is None:
        return Path(results_dir)
    # an unset shell variable: the run would land in ./results, outside the store
    if not str(store).strip():
        raise UsageError("--store is empty — pass the store's folder (it is created if missing)")
    if str(results_dir) != default_results_dir:
        raise UsageError(
            f"--store {store} and --results-dir {results_dir} both name where results go — "
            "pass one of them"
        )
    root = Path(store)
    try:
        refuse_link(root, "--store", STORE_FIX)
    except RefusedPath as error:
        raise UsageError(str(error)) from None
    if root.exists() and not root.is_dir():
        raise UsageError(
            f"--store {store} is not a folder — pass a folder (it is created if missing)"
        )
    folder = root / machine_folder_name(identity())
    check_writable(folder, str(store))
    return folder


def check_writable(folder: Path, store: str) -> None:
    """The machine folder, or its nearest existing ancestor, takes new files (the writer's check
    would name --results-dir). Creates nothing: a --collect-only run leaves no folder behind."""
    if folder.is_symlink():
        raise UsageError(
            f"--store {store}: the machine folder {folder} is a link (to {os.readlink(folder)}); "
            "gpubench does not write through links — replace the link with the folder itself, "
            "or pass --store where the folder lives"
        )
    nearest = next(p for p in (folder, *folder.parents) if p.exists() or p == Path(p.anchor or "."))
    if not nearest.is_dir():
        raise UsageError(
            f"--store {store}: {nearest} is a file, not a folder — pass a --store under a folder"
        )
    if not os.access(nearest, os.W_OK | os.X_OK):
        why = "read-only file system" if _read_only(nearest) else "permission denied"
        raise UsageError(
            f"--store {store}: cannot write into {nearest} ({why}) — pass a --store you can write "
            "to"
        )


def others_can_remove(folder: Path) -> tuple[str, bool] | None:
    """A line when others can remove or replace a run's files in `folder` (group- or world-writable,
    not sticky), and whether every user can (refused: gpubench makes nothing world-writable; a group
    gets a warning)."""
    try:
        info = os.stat(folder)
    except OSError:
        return None
    if not others_can_write(folder, info):
        return None
    anyone = bool(info.st_mode & 0o002)
    fix = (
        "have its owner chmod o-w,+t it, or pass another --store"
        if anyone
        else "have its owner chmod +t it"
    )
    return (
        f"{described(folder, info)} lets users other than its owner remove or replace this run's "
        f"files — {fix} (docs/usage.md, a store shared by a team)",
        anyone,
    )


def _read_only(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


@dataclass(frozen=True)
class FoundRun:
    """A run's CSV in a store, or None; a line for each candidate left out (whose file, and why)."""

    csv: Path | None
    ignored: tuple[str, ...] = ()


def find_run(store: Path, run_id: str) -> FoundRun:
    """The CSV run `run_id` wrote: a regular file of this user's own that no one else can write (in
    a team's store a member could plant one under a machine folder sorting first). Of two, the one
    beside the run's own exit record; never the first in sort order: one the store cannot tell apart
    is named, not adopted."""
    owned: list[Path] = []
    ignored: list[str] = []
    for path in run_files(store, run_id, ".csv"):
        if problem := not_yours(path):
            ignored.append(f"left out {problem} — the fleet takes only a CSV its own job wrote")
        else:
            owned.append(path)
    recorded = [
        path for path in owned if own_exit_code(path.with_name(f"{run_id}.exit.json")) is not None
    ]
    chosen = owned if len(owned) == 1 else recorded
    if len(chosen) == 1:
        ignored += [
            f"left out {path}: another CSV of run {run_id}, beside no exit record of it (the run "
            f"recorded its end beside {chosen[0]}) — move it out of the store if it is no run of "
            "yours"
            for path in owned
            if path != chosen[0]
        ]
        return FoundRun(chosen[0], tuple(ignored))
    if owned:
        ignored.append(
            f"run {run_id} has {len(owned)} CSVs of yours ({', '.join(map(str, owned))}) and the "
            "store does not say which its job wrote: none is taken — keep the one it wrote, move "
            "the others out of the store, then build the report with gpubench report"
        )
    return FoundRun(None, tuple(ignored))


def not_yours(path: Path) -> str | None:
    """'<path>: why' when `path` is no regular file of this user's alone (a link, another owner's,
    others can write)."""
    try:
        status = os.lstat(path)
    except OSError as error:
        return f"{path}: {error.strerror or error}"
    problem = kind_refusal(path, status.st_mode) or not_own(path, status)
    return str(problem) if problem is not None else None


def run_files(store: Path, run_id: str, suffix: str) -> list[Path]:
    """`<store>/*/<run_id><suffix>`, sorted: a run id may hold glob's `*?[`."""
    return sorted(store.glob(f"*/{glob.escape(run_id)}{suffix}"))


MAX_EXIT_BYTES = 4096


def write_exit(
    results_dir: Path, run_id: str, code: int, made_csv: bool | None = None
) -> str | None:
    """`<run_id>.exit.json`, so a fleet learns a job's outcome from the store; else the line saying
    why not. `made_csv`: whether this run's builds made `<run_id>.csv` (wrote rows into it). Two
    runs given one run id both find it free; the one whose build lost the race to create the CSV
    must not record its end over the winner's. So the run that made the CSV replaces any record; one
    that did not writes only where there is no CSV (refused before its first case) and no record
    yet. None: the caller cannot say (the record is replaced, as before)."""
    from gpubench.harness.records.results import write_sidecar

    # refused before it made its folder: the job's log holds the line
    if not results_dir.is_dir():
        return None
    csv = results_dir / f"{run_id}.csv"
    try:
        if made_csv is None or (made_csv and os.path.lexists(csv)):
            write_sidecar(results_dir, run_id, "exit", {"exit_code": int(code)})
        elif not os.path.lexists(csv):
            write_new_record(results_dir, run_id, int(code))
    # ResultsFull is an OSError
    except (OSError, ValueError) as error:
        return f"warning: {run_id}.exit.json not written ({' '.join(str(error).split())[:200]})"
    return None


def write_new_record(results_dir: Path, run_id: str, code: int) -> None:
    """The exit record, created exclusively (O_EXCL): a record there, another run's of this id, is
    kept. Left whole or not at all: a reader of a half-written one reads no valid record, as before
    any."""
    from gpubench.harness.records.results import RESULTS_DIR, RESULTS_FIX

    data = (json.dumps({"exit_code": code}, indent=2) + "\n").encode()
    create_whole(results_dir, f"{run_id}.exit.json", data, RESULTS_DIR, RESULTS_FIX)


def own_exit_code(path: Path) -> int | None:
    """The exit code in the record at `path`; None if none (valid), or not this user's own (a team
    could plant one)."""
    try:
        record = read_json(path, MAX_EXIT_BYTES, "exit record", own=True)
    except (OSError, ValueError):
        return None
    code = record.get("exit_code") if isinstance(record, dict) else None
    return code if type(code) is int and 0 <= code <= 255 else None


def recorded_exit(store: Path, run_id: str) -> int | None:
    """The exit code `run_id` recorded; None if none (valid) yet. Records of this user's own in two
    machine folders (one run id run twice) that disagree give the worst: a failure is never hidden
    behind the other's 0."""
    codes = {
        code
        for path in run_files(store, run_id, ".exit.json")
        if (code := own_exit_code(path)) is not None
    }
    return max(codes) if codes else None
