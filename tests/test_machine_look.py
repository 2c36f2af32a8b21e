"""The look at the machine before the first case: what it says, the threads it picks, the prior pace
it gives the plan, and the wait for a quiet machine."""

from __future__ import annotations

import argparse
import os
import types

import pytest
import torch

from gpubench.harness.commands import run_command
from gpubench.harness.commands.cli import build_parser
from gpubench.harness.commands.common import read_options
from gpubench.harness.core.options import RunOptions
from gpubench.harness.core.exits import UsageError
from gpubench.harness.devices import machine_load
from gpubench.harness.devices.env import gpu_utilization
from gpubench.harness.devices.machine_load import Look, look_line, threads_for, wait_quiet

CPU = torch.device("cpu")


def test_two_spinning_processes_on_two_cores_leave_one_thread():
    spun = Look(cores=2, busy_frac=0.97)
    assert spun.busy and spun.free_cores() == 1
    assert threads_for(spun, threads_now=2) == 1


def test_a_quiet_machine_keeps_its_threads_and_its_prices():
    quiet = Look(cores=8, busy_frac=0.1)
    assert not quiet.busy and threads_for(quiet, threads_now=8) is None
    # busy, but no fewer free cores than threads: nothing to move
    assert threads_for(Look(cores=8, busy_frac=0.4), threads_now=4) is None


def test_the_line_says_what_was_seen_and_what_it_does_to_the_figures():
    busy = look_line(Look(2, 0.97), (2, 1), CPU)
    assert busy == (
        "gpubench: machine busy before the first case: other processes used 97% of the 2 cores — "
        "torch threads 2 -> 1 (the free cores); figures may read slow and their rows are flagged "
        "busy; --wait-quiet 10m waits for a quieter machine first"
    )
    assert look_line(Look(2, 0.01), None, CPU) == (
        "gpubench: machine quiet before the first case (other processes used 1% of the 2 cores)"
    )
    gpu = look_line(
        Look(16, 0.0, gpu_other_procs=2, gpu_util_frac=0.0), None, torch.device("cuda:0")
    )
    assert "busy" in gpu and "2 other process(es) hold cuda:0; cuda:0 0% utilized" in gpu
    # a process NVML does not list (another container) still shows as the GPU's utilization
    hidden = look_line(
        Look(16, 0.0, gpu_other_procs=0, gpu_util_frac=0.97), None, torch.device("cuda:0")
    )
    assert hidden.startswith("gpubench: machine busy") and "cuda:0 97% utilized" in hidden


def test_the_gpu_utilization_is_read_from_nvml_or_none_where_it_cannot_tell():
    class Nvml:
        @staticmethod
        def nvmlDeviceGetHandleByIndex(index):
            return index

        @staticmethod
        def nvmlDeviceGetUtilizationRates(handle):
            return types.SimpleNamespace(gpu=42, memory=3)

    def no_nvml():
        raise OSError("libnvidia-ml.so.1: cannot open shared object file")

    assert gpu_utilization(0, lambda: Nvml) == 0.42
    assert gpu_utilization(0, no_nvml) is None


def test_the_wait_ends_when_the_machine_turns_quiet_or_its_time_is_up(monkeypatch):
    looks = iter([Look(2, 0.9), Look(2, 0.8), Look(2, 0.05)])
    monkeypatch.setattr(machine_load, "look", lambda meter, device, window_s: next(looks))
    said: list[str] = []
    assert not wait_quiet(CPU, 600.0, said.append).busy
    assert said == [
        "gpubench: waiting up to 600 s for a quiet machine (other processes used 90% of the 2 "
        "cores)"
    ]
    clock = iter([0.0, 0.5, 2.0])
    monkeypatch.setattr(machine_load, "look", lambda meter, device, window_s: Look(2, 0.9))
    said.clear()
    assert wait_quiet(CPU, 1.0, said.append, now=lambda: next(clock)).busy
    assert said[-1] == "gpubench: still busy after 1 s: measuring anyway"


def test_gpubench_run_waits_before_its_budget_starts_and_its_builds_do_not_wait_again(monkeypatch):
    waited: list[float] = []
    monkeypatch.setattr(
        machine_load, "wait_quiet", lambda device, wait_s, say: waited.append(wait_s)
    )
    args = argparse.Namespace(run=RunOptions(device="cpu", wait_quiet_s=120.0))
    run_command.wait_for_quiet(args)
    # the builds' plans carry no wait
    assert waited == [120.0] and args.run.wait_quiet_s is None
    # read once, refused
    with pytest.raises(UsageError, match=r"^--wait-quiet '10': use a duration such as 90s"):
        read_options(build_parser().parse_args(["run", "--wait-quiet", "10"]))


def test_the_load_is_read_on_the_cpus_this_process_may_run_on(tmp_path, monkeypatch):
    """Pinned to CPU 0 (taskset -c 0) of two, a neighbour spinning on CPU 1 took half the machine:
    the rows read busy and the threads moved for a load that never touched the run's core."""
    stat = tmp_path / "stat"
    stat.write_text("cpu  900 0 100 5000\ncpu0 10 0 0 2500\ncpu1 890 0 100 2500\nintr 12 3\n")
    assert machine_load.cpus_busy_s(frozenset({0}), stat) == 10 / os.sysconf("SC_CLK_TCK")
    assert machine_load.cpus_busy_s(frozenset({1}), stat) == 990 / os.sysconf("SC_CLK_TCK")
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert machine_load.own_cpus(stat) == {0}
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    # every CPU: the machine's share, as psutil sums it
    assert machine_load.own_cpus(stat) is None
    assert machine_load.own_cpus(tmp_path / "absent") is None


def test_torch_threads_past_the_cores_this_process_may_use_are_cut_on_a_quiet_machine_too():
    """A container's CPU quota of 2 on a many-core machine: torch counts the affinity (every core),
    its threads queued for the quota's time and were kept, the machine being quiet."""
    quota = Look(cores=2, busy_frac=0.05)
    assert threads_for(quota, threads_now=8) == 2 and threads_for(quota, threads_now=2) is None
    assert look_line(quota, (8, 2), CPU) == (
        "gpubench: machine quiet before the first case (other processes used 5% "
        "of the 2 cores); torch threads 8 -> 2 (the cores this process may use)"
    )
