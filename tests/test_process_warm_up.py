"""A build process's warm-up before its cases: the device once, DataLoader workers once before the
first case that has them, outside every timed region."""

from __future__ import annotations

import pytest
import torch

from gpubench.harness.workloads.common import process_warm_up

CPU = torch.device("cpu")


def test_a_process_warms_its_device_once_and_its_workers_once_before_the_first_case_with_workers(
    monkeypatch,
):
    warmed: list[str] = []
    monkeypatch.setattr(process_warm_up, "_warmed", set())
    monkeypatch.setattr(process_warm_up, "warm_device", lambda device: warmed.append(f"{device}"))
    monkeypatch.setattr(
        process_warm_up, "warm_workers", lambda device: warmed.append(f"{device} workers")
    )
    for workers in (False, False, True, False, True):
        process_warm_up.warm_once(CPU, workers)
    assert warmed == ["cpu", "cpu workers"]


def test_the_device_warm_up_steps_a_conv_without_a_process():
    process_warm_up.warm_device(CPU)


@pytest.mark.process
def test_the_worker_warm_up_feeds_a_dataloader_and_leaves_nothing_running():
    process_warm_up.warm_workers(CPU)
    assert not [p for p in torch.multiprocessing.active_children() if p.is_alive()]
