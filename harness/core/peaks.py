"""Datasheet peaks (dense, no sparsity) of common accelerators; torch-free, reports use it too. A
figure above peak is flagged as impossible. Achievable rates are lower (mamf-finder: H100/H200 bf16
~795 of 989 TFLOP/s)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DevicePeak:
    # dtype -> dense TFLOP/s
    tflops: dict[str, float]
    # device memory bandwidth, GB/s
    mem_gbps: float


# Ordered: the first name that is a substring of the device name wins (so "H100 PCIe" before
# "H100"). The NVL cards (PCIe, 400 W) are slower than the SXM parts their names begin with:
# NVIDIA's H200 NVL and H100 NVL sheets.
PEAKS: tuple[tuple[str, DevicePeak], ...] = (
    ("H200 NVL", DevicePeak({"fp32": 60.0, "tf32": 417.5, "fp16": 835.5, "bf16": 835.5}, 4800)),
    ("H100 NVL", DevicePeak({"fp32": 60.0, "tf32": 417.5, "fp16": 835.5, "bf16": 835.5}, 3900)),
    ("H200", DevicePeak({"fp32": 66.9, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4}, 4800)),
    ("H100 PCIe", DevicePeak({"fp32": 51.2, "tf32": 378.0, "fp16": 756.0, "bf16": 756.0}, 2000)),
    ("H100", DevicePeak({"fp32": 66.9, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4}, 3350)),
    ("A100", DevicePeak({"fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0}, 2039)),
    ("L40S", DevicePeak({"fp32": 91.6, "tf32": 183.0, "fp16": 362.0, "bf16": 362.0}, 864)),
    ("L4", DevicePeak({"fp32": 30.3, "tf32": 60.0, "fp16": 121.0, "bf16": 121.0}, 300)),
    ("A10", DevicePeak({"fp32": 31.2, "tf32": 62.5, "fp16": 125.0, "bf16": 125.0}, 600)),
    ("RTX 4090", DevicePeak({"fp32": 82.6, "tf32": 82.6, "fp16": 165.2, "bf16": 165.2}, 1008)),
    ("RTX 3090", DevicePeak({"fp32": 35.6, "tf32": 35.6, "fp16": 71.0, "bf16": 71.0}, 936)),
    ("V100", DevicePeak({"fp32": 15.7, "fp16": 125.0}, 900)),
    ("T4", DevicePeak({"fp32": 8.1, "fp16": 65.0}, 320)),
)


def device_peak(device_name: str) -> DevicePeak | None:
    for key, peak in PEAKS:
        if key.lower() in device_name.lower():
            return peak
    return None


def peak_tflops(device_name: str, dtype: str) -> float | None:
    peak = device_peak(device_name)
    return peak.tflops.get(dtype) if peak else None


def peak_gbps(device_name: str) -> float | None:
    peak = device_peak(device_name)
    return peak.mem_gbps if peak else None
