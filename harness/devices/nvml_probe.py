"""NVML read field by field: a GPU (or VM) answering NotSupported for one field loses only that
field, and says why. Power prefers the field NVML_FI_DEV_POWER_INSTANT: nvmlDeviceGetPowerUsage
averages the last second on Ampere and newer, so for a region under a second it mostly reports
earlier work."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

# NVML_FI_DEV_POWER_INSTANT in nvml.h (milliwatts), for a pynvml without the name
POWER_INSTANT_FIELD = 186
NVML_SUCCESS = 0
# nvmlDeviceGetPowerUsage's averaging window on Ampere and newer
AVERAGED_POWER_WINDOW_S = 1.0
# nvmlValueType_t -> the member of the value union that holds it
VALUE_MEMBERS = {
    0: "dVal",
    1: "uiVal",
    2: "ulVal",
    3: "ullVal",
    4: "sllVal",
    5: "siVal",
    6: "usVal",
}


def why(error: BaseException) -> str:
    """One line for an NVML error (pynvml's NVMLError_NotSupported prints 'Not Supported')."""
    return " ".join(str(error).split()) or type(error).__name__


def load_nvml() -> Any:
    import pynvml

    pynvml.nvmlInit()
    return pynvml


def nvml_index(torch_index: int) -> int:
    """NVML's number for torch's GPU: NVML numbers physically, torch after CUDA_VISIBLE_DEVICES (=3:
    cuda:0 is NVML's 3); torch's own mapping where it has one."""
    mapping = getattr(torch.cuda, "_get_nvml_device_index", None)
    if mapping is None:
        return torch_index
    try:
        return int(mapping(torch_index))
    # an unparsable CUDA_VISIBLE_DEVICES: torch's numbering is the best guess
    except Exception:
        return torch_index


def nvml_handle(torch_index: int, nvml_loader: Callable[[], Any] = load_nvml) -> tuple[Any, Any]:
    """NVML and its handle of torch's GPU `torch_index`; raises without NVML or a driver."""
    nvml = nvml_loader()
    return nvml, nvml.nvmlDeviceGetHandleByIndex(nvml_index(torch_index))


def as_text(value: bytes | str) -> str:
    """NVML's strings: bytes from older pynvml, str from newer."""
    return value.decode() if isinstance(value, bytes) else str(value)


def read_each(readers: dict[str, Callable[[], Any]]) -> dict[str, Any]:
    """One reading of every field; one that fails now is left out of this reading only."""
    reading = {}
    for name, read in readers.items():
        try:
            reading[name] = read()
        # NotSupported (VMs), NoPermission, a transient error: this field only
        except Exception:
            continue
    return reading


def instant_power_w(nvml: Any, handle: Any) -> float:
    """The instantaneous board power; raises where the driver does not answer the field."""
    field_id = getattr(nvml, "NVML_FI_DEV_POWER_INSTANT", POWER_INSTANT_FIELD)
    [value] = nvml.nvmlDeviceGetFieldValues(handle, [field_id])
    # per-field status: the call itself succeeds
    if value.nvmlReturn != NVML_SUCCESS:
        raise RuntimeError(f"NVML_FI_DEV_POWER_INSTANT answered error {value.nvmlReturn}")
    return float(getattr(value.value, VALUE_MEMBERS.get(int(value.valueType), "uiVal"))) / 1000.0


def telemetry_readers(nvml: Any, handle: Any) -> dict[str, Callable[[], float]]:
    """Every telemetry field, each read on its own; power twice: instantaneous first, the average as
    fallback."""

    # the newer name first (NVML 12.2 renamed throttle reasons to clock events)
    def throttle_bits() -> float:
        reasons = (
            getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        return float(reasons(handle))

    return {
        "sm_clock_mhz": lambda: float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
        "temp_c": lambda: float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
        "power_instant_w": lambda: instant_power_w(nvml, handle),
        "power_average_w": lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
        "throttle_bits": throttle_bits,
    }


@dataclass
class NvmlProbe:
    """Fields that answered (`readers`, power as `power_w`), those that did not (`missing`: field ->
    why)."""

    readers: dict[str, Callable[[], float]]
    missing: dict[str, str] = field(default_factory=dict)
    # "instant" | "average" (a 1 s average) | "" (no power)
    power: str = ""

    def sample(self) -> dict[str, float]:
        return read_each(self.readers)

    @property
    def note(self) -> str:
        """What the run's telemetry lacks, in one line (empty when nothing is missing)."""
        parts = [f"{name} ({reason})" for name, reason in self.missing.items()]
        if self.power == "average":
            parts.append(
                f"instantaneous power: gpu_power_w is NVML's {AVERAGED_POWER_WINDOW_S:g} s "
                f"average, left empty for regions under {AVERAGED_POWER_WINDOW_S:g} s"
            )
        return ("NVML did not answer: " + "; ".join(parts)) if parts else ""


def probe_nvml(nvml: Any, handle: Any) -> NvmlProbe:
    """Reads every field once and keeps those that answered; power instantaneous where it answers,
    else averaged."""
    readers, missing = {}, {}
    for name, read in telemetry_readers(nvml, handle).items():
        try:
            read()
            readers[name] = read
        # NotSupported, NoPermission, an old driver: this field only
        except Exception as error:
            missing[name] = why(error)
    power = ""
    if "power_instant_w" in readers:
        readers.pop("power_average_w", None)
        missing.pop("power_average_w", None)
        power = "instant"
    elif "power_average_w" in readers:
        power = "average"
        # said once, in `note`, as what the averaged power means
        missing.pop("power_instant_w", None)
    readers = {
        ("power_w" if name.startswith("power_") else name): read for name, read in readers.items()
    }
    return NvmlProbe(readers, missing, power)


def running_pids(nvml: Any, handle: Any) -> tuple[set[int] | None, str]:
    """PIDs holding a GPU context. A failed graphics query (common on data-centre GPUs and VMs)
    drops only itself; a failed compute query leaves the busy-GPU check unanswered (None) and says
    why."""
    pids: set[int] = set()
    try:
        pids |= {p.pid for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)}
    # NotSupported in many VMs, NoPermission in containers
    except Exception as error:
        return None, (
            "the busy-GPU check is off: NVML's running compute processes query answered "
            f"{why(error)}; gpu_other_procs stays empty"
        )
    try:
        pids |= {p.pid for p in nvml.nvmlDeviceGetGraphicsRunningProcesses(handle)}
    # compute processes are what a benchmark competes with
    except Exception:
        pass
    return pids, ""
