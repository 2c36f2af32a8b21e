"""Device resolution, synchronization and memory figures for cuda, mps and cpu, and how many
processes (--nproc) the distributed cases may start on it: checked before any case."""

from __future__ import annotations

import functools
import gc
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import torch
from torch.profiler import ProfilerActivity, profile

from gpubench.harness.core.exits import UsageError
from gpubench.harness.devices.cpu_limits import usable_cores

DEVICE_CHOICES = "auto, cpu, cuda, cuda:N, mps"
_SPEC = re.compile(r"^(auto|cpu|mps|cuda)(?::(\d+))?$")


def seeded_generator(device: torch.device, seed: int) -> torch.Generator:
    """A generator for `randn_on`; on CUDA the device's own (the host takes ~1 s for an n=8192
    operand's 64M values, which a run's budget counts against the case's build)."""
    return torch.Generator(device=device if device.type == "cuda" else "cpu").manual_seed(seed)


def randn_on(
    shape: tuple[int, ...], device: torch.device, dtype: torch.dtype, generator: torch.Generator
) -> torch.Tensor:
    """Normal random values on `device`, drawn where `generator` lives."""
    if generator.device.type == device.type:
        return torch.randn(shape, generator=generator, device=device, dtype=dtype)
    return torch.randn(shape, generator=generator).to(device, dtype)


def mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def available_devices() -> list[str]:
    """Every device string this machine can run, best first."""
    found = (
        [f"cuda:{i}" for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    )
    if mps_available():
        found.append("mps")
    found.append("cpu")
    return found


def cuda_device_count() -> int:
    """GPUs torch can use here (0 without CUDA): `--device cuda:all` runs one per GPU."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve_device(spec: str) -> torch.device:
    """A --device value as a torch.device (`auto`: cuda, then mps, then cpu), or UsageError naming
    what exists."""
    text = spec.strip().lower()
    match = _SPEC.match(text)
    have = ", ".join(available_devices())
    if text == "cuda:all":
        raise UsageError(
            "'cuda:all' is for `gpubench run` (the micro cases on each GPU in turn); "
            f"here name one GPU: cuda:N (this machine has: {have})"
        )
    if not match:
        raise UsageError(
            f"unknown device {spec!r}: use one of {DEVICE_CHOICES} (this machine has: {have})"
        )
    kind, index = match.group(1), match.group(2)
    if kind == "auto":
        if index is not None:
            raise UsageError(
                f"'auto' takes no index: use one of {DEVICE_CHOICES} (this machine has: {have})"
            )
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("mps") if mps_available() else torch.device("cpu")
    if kind == "cpu":
        if index not in (None, "0"):
            raise UsageError(f"device {spec!r} does not exist: use --device cpu")
        return torch.device("cpu")
    if kind == "mps":
        if not mps_available():
            raise UsageError(
                "mps was requested but torch.backends.mps.is_available() is False — "
                f"use --device cpu (this machine has: {have})"
            )
        return torch.device("mps")
    if not torch.cuda.is_available():
        raise UsageError(
            "cuda was requested but torch.cuda.is_available() is False — "
            f"use --device cpu (this machine has: {have})"
        )
    ordinal = int(index) if index is not None else torch.cuda.current_device()
    if ordinal >= torch.cuda.device_count():
        raise UsageError(f"device {spec!r} does not exist: this machine has {have}")
    return torch.device("cuda", ordinal)


def synchronize(device: torch.device) -> None:
    """Wait until all queued work on `device` has finished (a no-op on cpu)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def empty_cache(device: torch.device, collect: bool = True) -> None:
    """Release cached blocks so the next case starts clean. `collect` runs gc first (~0.1 s with
    torch loaded); on the CPU tensors go with their last reference, so only a failed case needs it
    there."""
    if collect or device.type != "cpu":
        gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    elif device.type == "mps":
        torch.mps.empty_cache()


def process_rss_bytes() -> int:
    """Resident memory of this process (the cpu 'device memory')."""
    return int(psutil.Process(os.getpid()).memory_info().rss)


@dataclass(frozen=True)
class MemorySnapshot:
    allocated_bytes: int
    reserved_bytes: int
    peak_bytes: int
    # what peak_bytes measures: cuda-allocator, mps-driver, cpu-rss
    source: str


_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


def reset_peak_memory(device: torch.device) -> None:
    """Start a new peak window: CUDA's allocator counters, or on Linux VmHWM (reset by writing 5 to
    clear_refs). mps has no peak counter."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    elif device.type == "cpu":
        try:
            _CLEAR_REFS.write_text("5")
        except OSError:
            # not Linux, or not permitted: the peak then covers the whole process lifetime
            pass


def peak_rss_bytes() -> int:
    """Peak resident set since the last reset (VmHWM), else the current RSS."""
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return process_rss_bytes()


def memory_snapshot(device: torch.device) -> MemorySnapshot:
    """Allocated / reserved / peak bytes: cuda's allocator since reset_peak_memory; on mps the
    driver figure stands for the peak (no counter); on cpu the process's RSS and its peak
    (process-wide, not per tensor)."""
    if device.type == "cuda":
        return MemorySnapshot(
            torch.cuda.memory_allocated(device),
            torch.cuda.memory_reserved(device),
            torch.cuda.max_memory_allocated(device),
            "cuda-allocator",
        )
    if device.type == "mps":
        current = int(torch.mps.current_allocated_memory())
        driver = int(torch.mps.driver_allocated_memory())
        return MemorySnapshot(current, driver, driver, "mps-driver")
    rss = process_rss_bytes()
    return MemorySnapshot(rss, rss, peak_rss_bytes(), "cpu-rss")


# How each allocator words running out: CUDA/MPS say "out of memory"; the CPU allocator says
# "DefaultCPUAllocator: can't allocate memory: you tried to allocate N bytes".
_OOM_TEXTS = ("out of memory", "can't allocate memory", "cannot allocate memory")


def is_out_of_memory(error: BaseException) -> bool:
    """True for the allocator's out-of-memory errors on any backend (an `oom` row, not a
    failure)."""
    if isinstance(error, (torch.OutOfMemoryError, MemoryError)):
        return True
    text = str(error).lower()
    return isinstance(error, RuntimeError) and any(words in text for words in _OOM_TEXTS)


def dtype_skip_reason(device: torch.device, dtype_name: str) -> str | None:
    """Why `device` cannot run matmul-class work in `dtype_name`, or None when it can."""
    if dtype_name == "tf32" and device.type != "cuda":
        return f"tf32 is a CUDA tensor-core mode; not available on {device.type}"
    if device.type == "cuda":
        major, _ = torch.cuda.get_device_capability(device)
        if dtype_name == "tf32" and major < 8:
            return f"tf32 needs compute capability >= 8.0 (this GPU is {major}.x)"
        if dtype_name == "bf16" and not torch.cuda.is_bf16_supported():
            return "bf16 is not supported by this GPU"
    if device.type == "mps" and dtype_name == "bf16" and not _mps_bf16_ok():
        return "bf16 is not supported by this macOS/MPS version"
    return None


def _mps_bf16_ok() -> bool:
    try:
        torch.ones(1, dtype=torch.bfloat16, device="mps")
        return True
    except (RuntimeError, TypeError):
        return False


def unusable_gpu(device: torch.device) -> str | None:
    """A GPU the driver shows while the suite runs on the CPU because torch cannot see it (CPU
    wheel, CUDA wheel on ROCm, driver/runtime mismatch)."""
    if device.type != "cpu":
        return None
    for tool, marker, kind in (
        ("nvidia-smi", "/dev/nvidia0", "an NVIDIA GPU"),
        ("rocm-smi", "/dev/kfd", "an AMD GPU (ROCm)"),
    ):
        if Path(marker).exists() or shutil.which(tool):
            hip = getattr(torch.version, "hip", None) or "none"
            build = f"torch {torch.__version__} (cuda {torch.version.cuda or 'none'}, hip {hip})"
            return (
                f"this machine shows {kind} but {build} cannot use it — running on the CPU; "
                "install the torch build for your GPU"
            )
    return None


def cudnn_tf32_for(precision: str | None) -> bool:
    """cuDNN TF32 convolutions only for TF32 cases: torch's default (on) would make an "fp32" epoch
    TF32 convolutions beside IEEE linear layers; bf16/fp16 convolutions ignore the flag."""
    return precision == "tf32"


def scope_cudnn_tf32(allow: bool) -> Callable[[], None]:
    """Sets cudnn.allow_tf32 for one case and returns its restorer; harmless off cuda, so set on
    every device."""
    previous = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = allow
    return functools.partial(setattr, torch.backends.cudnn, "allow_tf32", previous)


def cpu_peak_bytes(fn: Callable[[], Any]) -> int:
    """Allocator-level peak above what was alive at the start (RSS would count datasets, libraries,
    earlier cases). Reads the undocumented `kineto_results`: `profile.events()` loses the
    allocations' time order that makes a peak."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = prof.profiler.kineto_results.events()
    records = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
    current = peak = 0
    for _, nbytes in records:
        current += nbytes
        peak = max(peak, current)
    return peak


# ---- the cores this process may use: what threads, ranks and shares are planned for
# -------------------------------

# gloo ranks beyond this share the cores so thinly that the case measures the scheduler
MAX_PROCS_PER_CORE = 4
# host memory one CPU rank needs: torch, the CNN, the preloaded dataset
RANK_HOST_BYTES = 1_500_000_000


def available_memory_bytes() -> int:
    return int(psutil.virtual_memory().available)


def default_nproc(device: torch.device) -> int:
    """The GPU count on cuda; 2 CPU ranks, or 1 where memory holds only one (check_nproc must accept
    the default)."""
    if device.type == "cuda":
        return torch.cuda.device_count()
    return 2 if 2 * RANK_HOST_BYTES <= available_memory_bytes() else 1


def check_cpu_nproc(nproc: int) -> None:
    """CPU ranks the machine cannot hold: too many per core, or more than its free memory."""
    cores = usable_cores()
    if nproc > MAX_PROCS_PER_CORE * cores:
        raise UsageError(
            f"--nproc {nproc} is more than {MAX_PROCS_PER_CORE} processes per core on the {cores} "
            f"core{'s' if cores != 1 else ''} this process may use — use --nproc "
            f"{MAX_PROCS_PER_CORE * cores} or fewer"
        )
    available = available_memory_bytes()
    if nproc > 1 and nproc * RANK_HOST_BYTES > available:
        fits = max(1, available // RANK_HOST_BYTES)
        raise UsageError(
            f"--nproc {nproc} needs about {nproc * RANK_HOST_BYTES / 1e9:.1f} GB "
            f"({RANK_HOST_BYTES / 1e9:.1f} GB per process) "
            f"but {available / 1e9:.1f} GB is available — use --nproc {fits} or fewer"
        )


def check_nproc(nproc: int, device: torch.device) -> int:
    """Refuses before launch what the machine cannot hold: more ranks than GPUs on cuda, than cores
    or memory on cpu."""
    if nproc < 1:
        raise UsageError(f"--nproc {nproc}: use a positive number of processes")
    if device.type == "cpu":
        check_cpu_nproc(nproc)
    if device.type == "cuda" and nproc > (gpus := torch.cuda.device_count()):
        raise UsageError(
            f"--nproc {nproc} needs {nproc} GPUs but this machine has {gpus} — "
            f"use --nproc {gpus} or fewer"
        )
    if device.type == "mps" and nproc > 1:
        raise UsageError(
            "DDP on mps is not supported by PyTorch — use --device cpu for gloo processes"
        )
    return nproc


# ---- the last-level cache: what a DRAM-resident working set must exceed
# -------------------------------------------

SYSFS_CPU = Path("/sys/devices/system/cpu")
CACHE_UNITS = {"K": 2**10, "M": 2**20, "G": 2**30}


def cache_size_bytes(text: str) -> int:
    """A sysfs cache size ('32768K', '1M', '512') in bytes; ValueError for anything else."""
    text = text.strip().upper()
    return int(text.rstrip("KMG")) * CACHE_UNITS.get(text[-1:], 1)


def llc_instances(cpu_root: Path = SYSFS_CPU, cpus: str = "cpu[0-9]*") -> dict[str, int]:
    """Each instance of the highest data cache level of `cpus`, by the CPUs that share it
    (shared_cpu_list), once."""
    top_level, instances = 0, dict[str, int]()
    for index in sorted(cpu_root.glob(f"{cpus}/cache/index[0-9]*")):
        try:
            if (index / "type").read_text().strip() == "Instruction":
                continue
            level, size = (
                int((index / "level").read_text()),
                cache_size_bytes((index / "size").read_text()),
            )
        except (OSError, ValueError):
            continue
        try:
            shared = (index / "shared_cpu_list").read_text().strip()
        # counted as this CPU's own: a cache counted twice only makes the arrays larger
        except OSError:
            shared = index.parent.parent.name
        if level > top_level:
            top_level, instances = level, {}
        if level == top_level:
            instances[shared] = size
    return instances


def total_llc_bytes(cpu_root: Path = SYSFS_CPU) -> int | None:
    """The machine's last-level cache: every instance summed — STREAM counts every cache a run can
    use, so two sockets or eight core complexes each bring their own. None where sysfs does not say
    (not Linux, a container that hides it)."""
    return sum(llc_instances(cpu_root).values()) or None


def cpu_llc_bytes() -> int | None:
    """One instance of the CPU's last-level cache (cpu0's), or None where sysfs does not say."""
    return next(iter(llc_instances(cpus="cpu0").values()), None)


@functools.cache
def last_level_cache_bytes(device: torch.device) -> int | None:
    """The cache in front of the device's memory, all of it: CUDA's L2, the CPU's last level summed
    over its instances (sysfs). None on MPS (Metal does not say) and where it cannot be read."""
    if device.type == "cuda":
        return cuda_l2_bytes(device)
    return total_llc_bytes() if device.type == "cpu" else None


def cuda_l2_bytes(device: torch.device) -> int | None:
    """A CUDA device's L2 cache, or None where torch cannot read it (no driver: cases listed for a
    GPU elsewhere)."""
    try:
        size = getattr(torch.cuda.get_device_properties(device.index or 0), "L2_cache_size", 0)
    except (RuntimeError, AssertionError):
        return None
    return int(size) or None


def device_memory_bytes(device: torch.device) -> int | None:
    """The memory a case's arrays live in: the GPU's on cuda, else the host's RAM (which MPS
    shares). Its total, not what is free now: a size derived from it must be the same in every build
    process of a run (it names the case)."""
    if device.type == "cuda":
        try:
            return int(torch.cuda.get_device_properties(device.index or 0).total_memory)
        except (RuntimeError, AssertionError):
            return None
    return int(psutil.virtual_memory().total)
