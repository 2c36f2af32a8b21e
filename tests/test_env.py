import os
import re

import torch

from gpubench.harness.devices.env import fingerprint, format_fingerprint, machine_identity
from gpubench.harness.records.store import machine_id

REQUIRED = (
    "cuda_available",
    "device_count",
    "current_device",
    "device_name",
    "torch_version",
    "cuda_version",
    "cudnn_version",
    "driver_version",
    "gpu_mem_bytes",
    "sm_count",
    "compute_capability",
    "cpu_model",
    "cpu_cores",
    "ram_bytes",
    "os",
    "python_version",
    "torch_threads",
    "tf32_matmul",
    "tf32_cudnn",
    "hostname",
    "git_commit",
    "machine_id",
)


def test_fingerprint_has_every_guide_field():
    fields = fingerprint(torch.device("cpu"))
    assert set(REQUIRED) <= set(fields)
    assert fields["torch_version"] == torch.__version__
    assert fields["cpu_cores"] >= 1 and fields["ram_bytes"] > 2**28
    assert fields["torch_threads"] == torch.get_num_threads()


def test_machine_id_is_short_stable_and_hardware_based():
    first, second = fingerprint(torch.device("cpu")), fingerprint(torch.device("cpu"))
    assert re.fullmatch(r"[0-9a-f]{12}", first["machine_id"])
    assert first["machine_id"] == second["machine_id"]
    # the store's folder and the rows agree
    assert first["machine_id"] == machine_id(machine_identity())


def test_a_run_pinned_to_fewer_cores_keeps_its_machines_identity(monkeypatch):
    """cpu_cores is a hardware fact (machine_id, the store's machine folder): a run under taskset is
    one machine."""
    whole = fingerprint(torch.device("cpu"))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    pinned = fingerprint(torch.device("cpu"))
    assert (
        pinned["cpu_cores"]
        == whole["cpu_cores"]
        == os.cpu_count()
        == machine_identity()["cpu_cores"]
    )
    assert pinned["machine_id"] == whole["machine_id"]


def test_format_is_one_aligned_line_per_field():
    text = format_fingerprint({"a": 1, "long_name": "x"})
    assert text.splitlines() == ["a          1", "long_name  x"]


def test_a_size_in_bytes_reads_at_its_scale_with_the_number_kept():
    assert format_fingerprint({"ram_bytes": 25276071936, "llc_bytes": None}).splitlines() == [
        "ram_bytes  23.5 GiB (25276071936 bytes)",
        "llc_bytes  None",
    ]
