"""The cores a run plans its threads, ranks and shares for are the ones its process may use: its CPU
affinity (taskset, a scheduler's allocation) and its cgroup's CPU quota (a container's --cpus), not
the machine's every core."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from runs import REPO

from gpubench.harness.devices import cpu_limits

EIGHT = set(range(8))


def cgroup(tmp_path: Path, membership: str, files: dict[str, str]) -> tuple[Path, Path]:
    """A fake cgroup tree under tmp_path/cgroup (its files by path) and a /proc/self/cgroup that
    names `membership`."""
    root = tmp_path / "cgroup"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    root.mkdir(exist_ok=True)
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text(membership)
    return root, proc


@pytest.mark.parametrize(
    ("membership", "files", "cores"),
    [
        # a container's --cpus 1.5: two cores busy at most
        ("0::/\n", {"cpu.max": "150000 100000\n"}, 2),
        # half a core: still one
        ("0::/\n", {"cpu.max": "50000 100000\n"}, 1),
        # no quota
        ("0::/\n", {"cpu.max": "max 100000\n"}, 8),
        # a parent's
        (
            "0::/job/step\n",
            {"job/cpu.max": "300000 100000\n", "job/step/cpu.max": "max 100000\n"},
            3,
        ),
        # a container sees its own cgroup as the root
        ("0::/elsewhere\n", {"cpu.max": "200000 100000\n"}, 2),
        (
            "4:cpu,cpuacct:/docker/x\n0::/\n",
            {
                "cpu,cpuacct/docker/x/cpu.cfs_quota_us": "200000\n",
                "cpu,cpuacct/docker/x/cpu.cfs_period_us": "100000\n",
            },
            2,
        ),
        # v1, no quota
        ("1:cpu:/\n", {"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, 8),
        # no cpu controller
        ("0::/\n", {}, 8),
        ("0::/\n", {"cpu.max": "garbage\n"}, 8),
    ],
)
def test_usable_cores_is_the_affinity_capped_by_the_cgroup_quota(
    tmp_path, monkeypatch, membership, files, cores
):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: EIGHT)
    assert cpu_limits.usable_cores(*cgroup(tmp_path, membership, files)) == cores


def test_usable_cores_is_never_more_than_the_affinity_nor_less_than_one(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3})
    assert cpu_limits.usable_cores(*cgroup(tmp_path, "0::/\n", {"cpu.max": "400000 100000\n"})) == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: EIGHT)
    assert cpu_limits.usable_cores(*cgroup(tmp_path, "0::/\n", {"cpu.max": "1000 100000\n"})) == 1
    # nothing readable: the affinity
    assert cpu_limits.usable_cores(tmp_path / "absent", tmp_path / "absent-proc") == 8


PINNED = """
import torch
from gpubench.harness.core.exits import UsageError
from gpubench.harness.devices import cpu_limits, device, machine_load
from gpubench.harness.workloads.common.epoch import PRELOADED
from gpubench.harness.workloads.mnist_epoch import setting_notes
from dataclasses import replace

print("usable", cpu_limits.usable_cores())
print("look", machine_load.look(machine_load.LoadMeter(), torch.device("cpu"), 0.0).cores)
try:
    device.check_cpu_nproc(5)
    print("nproc 5 accepted")
except UsageError as error:
    print("nproc", error)
loaded = replace(PRELOADED, loader="dataloader", num_workers=2)
print("notes", setting_notes(loaded, torch.device("cpu")))
"""


# taskset starts a process pinned to one core
@pytest.mark.process
@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs taskset and two cores to pin to one",
)
def test_a_process_pinned_to_one_core_plans_for_one_core():
    """Under `taskset -c 0` on two cores: the machine look counted 2 cores, 5 CPU ranks passed as
    2.5 per core, and 2 DataLoader workers raised no note."""
    done = subprocess.run(
        ["taskset", "-c", "0", sys.executable, "-c", PINNED],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert lines["usable"] == "1" and lines["look"] == "1", done.stdout
    assert "--nproc 5 is more than 4 processes per core" in lines["nproc"], done.stdout
    assert "num_workers=2 exceeds the 1 CPU cores" in lines["notes"], done.stdout
