"""The results store: the runs of many machines and many days in one folder tree,

    <store>/<machine>/<run_id>.csv        (+ <run_id>.env.json, <run_id>.exit.json and the run's other sidecars)

`gpubench run --store STORE` (and every job of `gpubench fleet`) writes into the folder of the
machine it runs on, resolved there. Many writers may share one store on NFS: each run writes only
its own files (the run id is unique: UTC time, host, pid, a random suffix), nothing is appended to
a file another run writes, and sidecars are written under a temporary name in the same folder and
renamed with os.replace (gpubench.harness.records.results.write_sidecar). Creating the machine folder is the only
shared step, and mkdir(exist_ok=True) is safe to race.

The machine folder is `<hostname>-<hash>`: the host for people, and 8 hex digits of a hash of the
hardware (CPU model, core count, RAM in GiB, the node's GPU names) so that a reinstalled host name
on new hardware starts a new history. The hash leaves out what changes without the machine
changing (kernel, driver, torch) and what the run chose (the device, CUDA_VISIBLE_DEVICES): a node's
CPU runs and GPU runs, before and after an upgrade, are one machine's history. Torch-free: the
identity itself is read by gpubench.harness.devices.env.machine_identity."""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

HARDWARE_KEYS = ("cpu_model", "cpu_cores", "ram_gib", "gpus")
MAX_HOST_CHARS = 40
REPORTS_FOLDER = "reports"  # <store>/reports/<fleet id>/: fleet reports, beside the machines


class StoreError(ValueError):
    """A --store that cannot be used: one line naming the fix."""


def safe_name(text: str) -> str:
    """A file-system-safe form of a host name or label (letters, digits, '-', '_', '.')."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text).strip(".") or "host"


def machine_hash(identity: dict[str, Any]) -> str:
    text = "|".join(f"{key}={identity.get(key, '')}" for key in HARDWARE_KEYS)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def machine_folder_name(identity: dict[str, Any]) -> str:
    """`<hostname>-<8 hex digits of the hardware hash>`, e.g. `gpu-node07-3fa9c2d1`."""
    host = safe_name(str(identity.get("hostname", "")))[:MAX_HOST_CHARS]
    return f"{host}-{machine_hash(identity)}"


def results_dir_for(store: str | Path | None, results_dir: str | Path, default_results_dir: str,
                    identity: Callable[[], dict[str, Any]]) -> Path:
    """Where a run writes: `<store>/<machine>/` with --store (the identity read on this machine),
    else --results-dir. The two name the same thing, so both at once is refused."""
    if store is None:
        return Path(results_dir)
    if not str(store).strip():  # an unset shell variable: the run would land in ./results, outside the store
        raise StoreError("--store is empty — pass the store's folder (it is created if missing)")
    if str(results_dir) != default_results_dir:
        raise StoreError(f"--store {store} and --results-dir {results_dir} both name where results go — pass one of them")
    root = Path(store)
    if root.exists() and not root.is_dir():
        raise StoreError(f"--store {store} is not a folder — pass a folder (it is created if missing)")
    folder = root / machine_folder_name(identity())
    check_writable(folder, str(store))
    return folder


def check_writable(folder: Path, store: str) -> None:
    """The machine folder, or the nearest folder above it that exists, must take new files: the
    writer's own check would name --results-dir, an option this run did not use. Creates nothing
    (a --collect-only run leaves no folder behind)."""
    if folder.is_symlink():
        raise StoreError(f"--store {store}: the machine folder {folder} is a link (to {os.readlink(folder)}); gpubench does not write "
                         "through links — replace the link with the folder itself, or pass --store where the folder lives")
    nearest = next(p for p in (folder, *folder.parents) if p.exists() or p == Path(p.anchor or "."))
    if not nearest.is_dir():
        raise StoreError(f"--store {store}: {nearest} is a file, not a folder — pass a --store under a folder")
    if not os.access(nearest, os.W_OK | os.X_OK):
        why = "read-only file system" if _read_only(nearest) else "permission denied"
        raise StoreError(f"--store {store}: cannot write into {nearest} ({why}) — pass a --store you can write to")


def others_can_remove(folder: Path) -> tuple[str, bool] | None:
    """A line when the existing `folder` lets users other than its owner remove or replace the files a
    run writes there (writable by a group not the owner's own, or by all, and not sticky: a machine
    folder made by hand, or in a store made without the sticky bit), and whether every user can: that
    is refused, as gpubench makes nothing world-writable; a group is named in a warning."""
    from gpubench.harness.records.job_files import described, own_group

    try:
        info = os.stat(folder)
    except OSError:
        return None
    if not info.st_mode & (0o002 if own_group(folder, info) else 0o022) or info.st_mode & stat.S_ISVTX:
        return None
    anyone = bool(info.st_mode & 0o002)
    fix = "have its owner chmod o-w,+t it, or pass another --store" if anyone else "have its owner chmod +t it"
    return (f"{described(folder, info)} lets users other than its owner remove or replace this run's files — "
            f"{fix} (docs/usage.md, a store shared by a team)", anyone)


def _read_only(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def find_run(store: Path, run_id: str) -> Path | None:
    """The CSV of run `run_id` in whichever machine folder holds it."""
    found = sorted(store.glob(f"*/{glob_escape(run_id)}.csv"))
    return found[0] if found else None


MAX_EXIT_BYTES = 4096


def write_exit(results_dir: Path, run_id: str, code: int) -> str | None:
    """`<run_id>.exit.json`: how gpubench run ended, beside its rows, so that a fleet learns a job's
    outcome from the store. None, or the line saying it could not be written (the rows stand)."""
    from gpubench.harness.records.results import write_sidecar

    if not results_dir.is_dir():  # refused before it made its folder: the job's log holds the line
        return None
    try:
        write_sidecar(results_dir, run_id, "exit", {"exit_code": int(code)})
    except (OSError, ValueError) as error:  # ResultsFull is an OSError
        return f"warning: {run_id}.exit.json not written ({' '.join(str(error).split())[:200]})"
    return None


def recorded_exit(store: Path, run_id: str) -> int | None:
    """The exit code run `run_id` recorded in the store (write_exit); None when there is none yet, or
    the file is not this user's own (a member of a team store could plant one) or holds no exit code."""
    from gpubench.harness.records.safe_files import read_json

    for path in sorted(store.glob(f"*/{glob_escape(run_id)}.exit.json")):
        try:
            record = read_json(path, MAX_EXIT_BYTES, "exit record", own=True)
        except (OSError, ValueError):
            continue
        code = record.get("exit_code") if isinstance(record, dict) else None
        if type(code) is int and 0 <= code <= 255:
            return code
    return None


def glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


def runs_in(store: Path) -> dict[str, list[Path]]:
    """machine folder name -> its run CSVs, oldest first (run ids start with the UTC time)."""
    machines: dict[str, list[Path]] = {}
    for csv in sorted(store.glob("*/*.csv")):
        if csv.is_file() and not csv.name.startswith("."):
            machines.setdefault(csv.parent.name, []).append(csv)
    return machines
