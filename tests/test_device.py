import pytest
import torch

from gpubench.harness.devices import device as devices
from gpubench.harness.devices.device import (
    dtype_skip_reason,
    is_out_of_memory,
    memory_snapshot,
    resolve_device,
)
from gpubench.harness.core.exits import UsageError


def test_auto_prefers_cuda_then_mps_then_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(devices, "mps_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    monkeypatch.setattr(devices, "mps_available", lambda: True)
    assert resolve_device("auto") == torch.device("mps")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert resolve_device("auto") == torch.device("cuda", 0)


def test_explicit_cpu_and_case_insensitive():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(" CPU ") == torch.device("cpu")


@pytest.mark.parametrize("spec", ["gpu", "cuda:x", "auto:1", "cpu:3", "", "tpu"])
def test_bad_strings_name_the_choices(spec):
    with pytest.raises(UsageError) as error:
        resolve_device(spec)
    message = str(error.value)
    assert "\n" not in message
    # always says what exists
    assert "cpu" in message


def test_unavailable_cuda_says_to_use_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(UsageError, match=r"use --device cpu"):
        resolve_device("cuda")


def test_cuda_index_is_checked_against_device_count(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(UsageError, match="does not exist"):
        resolve_device("cuda:5")


def test_unavailable_mps(monkeypatch):
    monkeypatch.setattr(devices, "mps_available", lambda: False)
    with pytest.raises(UsageError, match="mps"):
        resolve_device("mps")


def test_dtype_skip_reasons_on_cpu():
    cpu = torch.device("cpu")
    assert "tf32" in dtype_skip_reason(cpu, "tf32")
    assert dtype_skip_reason(cpu, "fp32") is None
    assert dtype_skip_reason(cpu, "bf16") is None


def test_cpu_memory_peak_tracks_a_large_allocation():
    cpu = torch.device("cpu")
    devices.reset_peak_memory(cpu)
    before = memory_snapshot(cpu)
    # 64 MiB, touched
    block = torch.ones(64 * 2**20 // 4)
    after = memory_snapshot(cpu)
    del block
    assert before.allocated_bytes > 0
    assert after.peak_bytes >= before.allocated_bytes + 32 * 2**20


def test_out_of_memory_is_recognised():
    assert is_out_of_memory(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate"))
    assert is_out_of_memory(RuntimeError("MPS backend out of memory"))
    assert not is_out_of_memory(RuntimeError("shape mismatch"))


def test_a_real_cpu_allocation_failure_is_recognised():
    with pytest.raises(RuntimeError) as caught:
        # 4 EiB: no machine's allocator can grant it
        torch.empty(2**62, dtype=torch.uint8)
    assert is_out_of_memory(caught.value), str(caught.value)


def test_cpu_ranks_are_counted_against_the_cores_this_process_may_use(monkeypatch):
    """Pinned to one core of many, 5 gloo ranks passed as a few per core of the machine's."""
    monkeypatch.setattr(devices, "usable_cores", lambda: 1)
    monkeypatch.setattr(devices, "available_memory_bytes", lambda: 64_000_000_000)
    with pytest.raises(
        UsageError,
        match="^--nproc 5 is more than 4 processes per core on the 1 core this process may "
        "use — use --nproc 4 or fewer$",
    ):
        devices.check_nproc(5, torch.device("cpu"))
    assert devices.check_nproc(4, torch.device("cpu")) == 4
