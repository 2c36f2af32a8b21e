"""The machine fingerprint: what every result row carries, and `gpubench env` prints."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import torch

import gpubench.harness
from gpubench import CHECKOUT
from gpubench.harness.devices.device import cpu_llc_bytes, cuda_l2_bytes
from gpubench.harness.devices.nvml_probe import (
    as_text,
    instant_power_w,
    load_nvml,
    nvml_handle,
    read_each,
    running_pids,
)
from gpubench.harness.processes.turns import SESSION_PID_ENV
from gpubench.harness.records.store import machine_id
from gpubench.reports.render.units import human


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    if platform.system() == "Darwin":
        try:
            return subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"],
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine()


def ram_bytes() -> int:
    return int(psutil.virtual_memory().total)


def git_commit() -> str:
    """Short commit of the suite's own checkout, '+dirty' when edited; 'unknown' outside git, an
    installed wheel included (a project around the installed package has its own history, not the
    suite's)."""
    root = CHECKOUT
    if root is None:
        return "unknown"
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=5,
        )
        if sha.returncode != 0:
            return "unknown"
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=5,
        )
        return sha.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def gpu_telemetry(index: int = 0, nvml_loader: Callable[[], Any] = load_nvml) -> dict[str, Any]:
    """NVML clocks, power and temperature, each field on its own (an unreported one is left out; {}
    without NVML). Read at a run's start and end: throttling explains many odd results."""
    try:
        nvml, handle = nvml_handle(index, nvml_loader)
    # NVML missing or no driver
    except Exception:
        return {}
    return read_each(
        {
            "gpu_sm_clock_mhz": lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),
            "gpu_mem_clock_mhz": lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM),
            "gpu_temp_c": lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),
            # NVML's 1 s average on Ampere and newer
            "gpu_power_w": lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
            "gpu_power_instant_w": lambda: instant_power_w(nvml, handle),
            "gpu_power_limit_w": lambda: nvml.nvmlDeviceGetPowerManagementLimit(handle) / 1000.0,
        }
    )


def gpu_other_processes(index: int = 0, nvml_loader: Callable[[], Any] = load_nvml) -> int | None:
    """Other processes (not ours) holding a GPU context: another job changes results. None where
    NVML cannot tell (running_pids says why; the run says it once)."""
    try:
        pids, _ = running_pids(*nvml_handle(index, nvml_loader))
        return None if pids is None else len(pids - our_pids())
    # NVML missing, no permission, or inside a container that hides pids
    except Exception:
        return None


def gpu_utilization(index: int = 0, nvml_loader: Callable[[], Any] = load_nvml) -> float | None:
    """The share of the last NVML sample period (1/6 s to 1 s) in which a kernel ran on the GPU, or
    None where NVML cannot tell. Read before this process runs one, it is what others run there."""
    try:
        nvml, handle = nvml_handle(index, nvml_loader)
        return float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu) / 100.0
    # NVML missing, NotSupported on a VM, no permission
    except Exception:
        return None


def our_pids() -> set[int]:
    """This process and its children; in a `gpubench ab` pair, every process its session started
    (the idle partner holds its own context). The session counts only while an ancestor: an
    unrelated process may inherit the variable."""
    me = psutil.Process()
    root = me
    session = os.environ.get(SESSION_PID_ENV, "")
    if session.isdigit() and int(session) in {parent.pid for parent in me.parents()}:
        root = psutil.Process(int(session))
    return {root.pid} | {child.pid for child in root.children(recursive=True)}


def driver_version() -> str:
    try:
        return as_text(load_nvml().nvmlSystemGetDriverVersion())
    except Exception:
        return ""


def nvml_gpu_names() -> list[str]:
    """Every GPU of the node by NVML name (no CUDA context; CUDA_VISIBLE_DEVICES hides none); []
    without NVML."""
    try:
        nvml = load_nvml()
        return [
            as_text(nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(i)))
            for i in range(nvml.nvmlDeviceGetCount())
        ]
    # NVML missing, no driver
    except Exception:
        return []


def host_name() -> str:
    """The host name as encodable text: a non-UTF-8 name arrives with surrogates the CSV writer
    cannot encode (every row would fail), so its bytes become backslash escapes ('n\\xffd')."""
    return os.fsencode(socket.gethostname()).decode("utf-8", "backslashreplace")


def machine_identity() -> dict[str, Any]:
    """What names this machine (records.store.machine_id: the rows' column, the store's folder):
    host and hardware, every GPU of the node by NVML's name (a job given one GPU of eight is the
    same machine; no CUDA context)."""
    return {
        "hostname": host_name(),
        "cpu_model": cpu_model(),
        "cpu_cores": os.cpu_count() or 0,
        "ram_gib": round(ram_bytes() / 2**30),
        "gpus": ",".join(nvml_gpu_names()),
    }


def fingerprint(device: torch.device) -> dict[str, Any]:
    """The environment a result depends on (versions, device), plus what explains a number: CPU,
    RAM, threads, TF32."""
    cuda = torch.cuda.is_available()
    cpu = cpu_model()
    fields: dict[str, Any] = {
        "hostname": host_name(),
        "device": str(device),
        "device_name": cpu,
        "cuda_available": cuda,
        "device_count": torch.cuda.device_count() if cuda else 0,
        "current_device": torch.cuda.current_device() if cuda else "",
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda or "",
        "cudnn_version": str(torch.backends.cudnn.version() or "") if cuda else "",
        "driver_version": driver_version() if cuda else "",
        "gpu_mem_bytes": "",
        "sm_count": "",
        "compute_capability": "",
        "cpu_model": cpu,
        # the machine's every core, a hardware fact (machine_id): not the run's share
        "cpu_cores": os.cpu_count() or 0,
        "ram_bytes": ram_bytes(),
        "llc_bytes": cuda_l2_bytes(device) if device.type == "cuda" else cpu_llc_bytes(),
        "os": f"{platform.system()} {platform.release()}",
        "python_version": platform.python_version(),
        "torch_threads": torch.get_num_threads(),
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "tf32_cudnn": torch.backends.cudnn.allow_tf32,
        "gpubench_version": gpubench.harness.__version__,
        "git_commit": git_commit(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device.index or 0)
        fields.update(
            device_name=props.name,
            gpu_mem_bytes=int(props.total_memory),
            sm_count=int(props.multi_processor_count),
            compute_capability=f"{props.major}.{props.minor}",
        )
    elif device.type == "mps":
        fields["device_name"] = f"Apple MPS ({cpu})"
    fields["machine_id"] = machine_id(machine_identity())
    return fields


def format_fingerprint(fields: dict[str, Any]) -> str:
    """Aligned `key value` lines; sizes in bytes also at a readable scale (`--json` keeps the
    number)."""
    width = max(len(k) for k in fields)

    def shown(key: str, value: Any) -> Any:
        sized = key.endswith("_bytes") and isinstance(value, int) and not isinstance(value, bool)
        return f"{human(value, 'bytes')} ({value} bytes)" if sized else value

    return "\n".join(f"{k:<{width}}  {shown(k, v)}" for k, v in fields.items())
