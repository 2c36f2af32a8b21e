"""A build process's warm-up before its first case: once per device, outside every timed region."""

from __future__ import annotations

import torch

from gpubench.harness.workloads.common import process_warm_up


def test_a_process_warms_each_device_once_before_its_first_case(monkeypatch):
    warmed: list[str] = []
    monkeypatch.setattr(process_warm_up, "_warmed", set())
    monkeypatch.setattr(process_warm_up, "warm_process", lambda device: warmed.append(str(device)))
    for _ in range(3):
        process_warm_up.warm_once(torch.device("cpu"))
    assert warmed == ["cpu"]


def test_the_warm_up_feeds_a_dataloader_through_its_workers_and_steps_a_conv_on_the_device():
    process_warm_up.warm_process(torch.device("cpu"))  # forks its workers and returns: nothing left running
    assert not [p for p in torch.multiprocessing.active_children() if p.is_alive()]
