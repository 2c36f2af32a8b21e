"""The cores this process may use: its CPU affinity (taskset, a scheduler's allocation), fewer where
a cgroup's CPU quota (a container's `--cpus`, a systemd slice) allows less. `os.cpu_count()` counts
the machine's, and planned threads and shares for cores the run did not have. Torch-free."""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_ROOT, PROC_CGROUP = Path("/sys/fs/cgroup"), Path("/proc/self/cgroup")


def usable_cores(cgroup_root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> int:
    """The cores its affinity lets this process run on (taskset, a scheduler's allocation), fewer
    where its cgroup's CPU quota (a container's --cpus) buys less time, rounded up; at least 1. Not
    os.cpu_count(), the machine's every core: threads and ranks planned for those queue for the few
    the run has."""
    try:
        cores = len(os.sched_getaffinity(0))
    # no affinity to read (macOS)
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quotas = [
        quota
        for folder in cpu_cgroups(cgroup_root, proc_cgroup)
        if (quota := cpu_quota(folder)) is not None
    ]
    return max(1, min([cores, *(math.ceil(quota) for quota in quotas)]))


def cpu_cgroups(root: Path, proc_cgroup: Path) -> list[Path]:
    """The cpu controller's folders of this process's cgroup and of each parent up to the root: a
    parent's quota binds its children too. In a container the root is the container's own cgroup,
    whatever the path says."""
    try:
        lines = [
            line.split(":", 2)
            for line in proc_cgroup.read_text().splitlines()
            if line.count(":") >= 2
        ]
    except OSError:
        lines = []
    folders: list[Path] = []
    for _, controllers, path in lines:
        if controllers and "cpu" not in controllers.split(","):
            continue
        base = (
            root
            if not controllers
            else root / controllers
            if (root / controllers).is_dir()
            else root / "cpu"
        )
        own = base / path.strip().lstrip("/")
        folders += [own, *list(own.parents)[: len(own.relative_to(base).parts)]]
    return folders or [root, root / "cpu"]


def cpu_quota(folder: Path) -> float | None:
    """Cores' worth of time a period the folder's quota allows (v2 `cpu.max`, v1
    `cpu.cfs_quota_us`), None: none."""
    try:
        if (folder / "cpu.max").is_file():
            quota, period = (folder / "cpu.max").read_text().split()[:2]
        else:
            quota, period = (
                (folder / name).read_text() for name in ("cpu.cfs_quota_us", "cpu.cfs_period_us")
            )
        allowed, per = int(quota), int(period)
    # no such controller here, or "max" / "garbage"
    except (OSError, ValueError):
        return None
    return allowed / per if allowed > 0 and per > 0 else None
