"""Energy per timed region from cumulative counters (NVML on NVIDIA GPUs, RAPL on CPUs), and GPU
telemetry sampled during it. NVML's counter moves every 20-100 ms (Zeus and NVIDIA advise ~1 s
windows), RAPL's about every ms: a shorter region gets no figure, with the reason."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from gpubench.harness.devices.nvml_probe import (
    AVERAGED_POWER_WINDOW_S,
    load_nvml,
    nvml_handle,
    nvml_index,
    probe_nvml,
    running_pids,
    why,
)

POWERCAP_ROOT = Path("/sys/class/powercap")
# the counter moves every 20-100 ms: shorter regions are mostly quantization
NVML_MIN_WINDOW_S = 1.0
# RAPL updates about every 1 ms
RAPL_MIN_WINDOW_S = 0.05
# one NVML poll every 100 ms during a region (about 0.1% of a core)
TELEMETRY_INTERVAL_S = 0.1

# nvmlClocksThrottleReasons bits (nvml.h); idle and application clocks are not throttling. A
# data-centre GPU manages its boost by the software power cap under any heavy load: recorded, but
# only the slowdowns flag a row.
SLOWDOWN_BITS = 0x8 | 0x20 | 0x40 | 0x80
THROTTLE_REASONS = {
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
}


class EnergyCounter(Protocol):
    # "nvml", "rapl": the row's energy_source
    source: str
    # regions shorter than this give no energy figure
    min_window_s: float

    def read_j(self) -> float:
        """Joules since an arbitrary fixed moment; never decreases."""
        ...


class NvmlCounter:
    """nvmlDeviceGetTotalEnergyConsumption: millijoules since the driver loaded (Volta and
    newer)."""

    source = "nvml"
    min_window_s = NVML_MIN_WINDOW_S

    def __init__(self, index: int, nvml: Any) -> None:
        self.nvml = nvml
        self.handle = nvml.nvmlDeviceGetHandleByIndex(nvml_index(index))
        # raises here (not in a case) on a GPU without the counter
        self.read_j()

    def read_j(self) -> float:
        return float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)) / 1000.0


class RaplCounter:
    """Linux powercap's package zones (`intel-rapl:N`, AMD's too since 5.8) summed, unwrapped at
    max_energy_range_uj."""

    source = "rapl"
    min_window_s = RAPL_MIN_WINDOW_S

    def __init__(self, zones: list[Path]) -> None:
        self.zones = zones
        self.ranges_uj = [int((zone / "max_energy_range_uj").read_text()) for zone in zones]
        self.last_uj = [self._raw(zone) for zone in zones]
        self.total_uj = 0

    @staticmethod
    def _raw(zone: Path) -> int:
        return int((zone / "energy_uj").read_text())

    def read_j(self) -> float:
        for i, zone in enumerate(self.zones):
            now = self._raw(zone)
            delta = now - self.last_uj[i]
            # wrapped once
            self.total_uj += delta if delta >= 0 else delta + self.ranges_uj[i]
            self.last_uj[i] = now
        return self.total_uj / 1e6


def rapl_package_zones(root: Path = POWERCAP_ROOT) -> list[Path]:
    """Top-level RAPL zones (one per CPU package); sub-zones (core, uncore, dram) are inside
    them."""
    return [
        zone
        for zone in sorted(root.glob("intel-rapl:*"))
        if zone.name.count(":") == 1 and _zone_name(zone).startswith("package")
    ]


def _zone_name(zone: Path) -> str:
    try:
        return (zone / "name").read_text().strip()
    # unreadable: not a zone to count
    except OSError:
        return ""


def rapl_counter(root: Path = POWERCAP_ROOT) -> tuple[RaplCounter | None, str]:
    """The CPU's RAPL counter, or None and why not (said once per run)."""
    if not root.is_dir():
        return None, (
            f"no RAPL energy counters: {root} is absent (a virtual machine, or not Linux) — "
            "CPU energy columns stay empty"
        )
    zones = rapl_package_zones(root)
    if not zones:
        return None, f"no RAPL package zone under {root} — CPU energy columns stay empty"
    try:
        return RaplCounter(zones), ""
    except PermissionError:
        return None, (
            f"RAPL energy counters are readable by root only (Linux 5.10+): run as root or "
            f"`sudo chmod o+r {root}/intel-rapl:*/energy_uj` — CPU energy columns stay empty"
        )
    except (OSError, ValueError) as error:
        return (
            None,
            f"RAPL energy counters cannot be read ({error}) — CPU energy columns stay empty",
        )


def nvml_counter(
    index: int, nvml_loader: Callable[[], Any] = load_nvml
) -> tuple[NvmlCounter | None, str]:
    try:
        return NvmlCounter(index, nvml_loader()), ""
    # no nvidia-ml-py, no driver, a GPU older than Volta, no permission
    except Exception as error:
        return None, (
            f"no NVML energy counter ({why(error)}; needs nvidia-ml-py and a Volta or newer GPU) — "
            "energy columns stay empty"
        )


def energy_counter(
    device: torch.device,
    powercap_root: Path = POWERCAP_ROOT,
    nvml_loader: Callable[[], Any] = load_nvml,
) -> tuple[EnergyCounter | None, str]:
    """The counter for the benchmarked device, or None and the one line that says why."""
    if device.type == "cuda":
        return nvml_counter(device.index or 0, nvml_loader)
    if device.type == "cpu":
        return rapl_counter(powercap_root)
    return (
        None,
        f"no energy counter on {device.type} (macOS powermetrics needs root) — energy columns "
        "stay empty",
    )


@dataclass(frozen=True)
class EnergyReading:
    """A region's energy, or None with the reason (too short, a counter that did not move)."""

    energy_j: float | None
    seconds: float
    source: str = ""
    reason: str = ""

    @property
    def avg_power_w(self) -> float | None:
        return (
            self.energy_j / self.seconds if self.energy_j is not None and self.seconds > 0 else None
        )


class EnergyMeter:
    """Reads a counter at a region's edges. `start()` returns a mark; `stop(mark)` the reading."""

    def __init__(
        self,
        counter: EnergyCounter | None,
        note: str = "",
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.counter = counter
        # why there is no counter (empty when there is one)
        self.note = note
        self.clock = clock

    @property
    def available(self) -> bool:
        return self.counter is not None

    @property
    def min_window_s(self) -> float:
        return self.counter.min_window_s if self.counter is not None else float("inf")

    def start(self) -> tuple[float, float]:
        return (self.counter.read_j() if self.counter is not None else 0.0), self.clock()

    def stop(self, mark: tuple[float, float]) -> EnergyReading:
        end_j = self.counter.read_j() if self.counter is not None else 0.0
        seconds = self.clock() - mark[1]
        if self.counter is None:
            return EnergyReading(None, seconds)
        source = self.counter.source
        if seconds < self.counter.min_window_s:
            return EnergyReading(
                None,
                seconds,
                source,
                f"energy: region {seconds:.3g} s is shorter than the {source} "
                f"counter's {self.counter.min_window_s:g} s window",
            )
        energy_j = end_j - mark[0]
        if energy_j <= 0:
            return EnergyReading(
                None,
                seconds,
                source,
                f"energy: the {source} counter did not move in {seconds:.3g} s",
            )
        return EnergyReading(energy_j, seconds, source)


def idle_power_w(meter: EnergyMeter, seconds: float = 1.0) -> float | None:
    """Average power over `seconds` of doing nothing: the baseline the run's figures sit on."""
    if not meter.available:
        return None
    mark = meter.start()
    time.sleep(max(seconds, meter.min_window_s))
    return meter.stop(mark).avg_power_w


# ---- telemetry during a region ------------------------------------------------------------------


def throttle_names(bits: int) -> list[str]:
    return [name for bit, name in THROTTLE_REASONS.items() if bits & bit]


def summarize_telemetry(
    samples: list[dict[str, float]], region_s: float | None = None, power_averaged: bool = False
) -> dict[str, Any]:
    """Median SM clock, hottest temperature, mean power and every throttle reason seen. A 1 s
    averaged power says little about a shorter region: it is left out, and `gpu_power_note` (not a
    column) says why."""
    if not samples:
        return {}
    bits = 0
    for sample in samples:
        bits |= int(sample.get("throttle_bits", 0))
    summary: dict[str, Any] = {
        "gpu_throttle": ";".join(throttle_names(bits)),
        # not a column: what flags the row
        "gpu_slowdown": ";".join(throttle_names(bits & SLOWDOWN_BITS)),
    }
    for column, key, combine in (
        ("gpu_sm_clock_mhz", "sm_clock_mhz", statistics.median),
        ("gpu_temp_c", "temp_c", max),
        ("gpu_power_w", "power_w", statistics.fmean),
    ):
        values = [s[key] for s in samples if key in s]
        if values:
            summary[column] = combine(values)
    if (
        power_averaged
        and region_s is not None
        and region_s < AVERAGED_POWER_WINDOW_S
        and "gpu_power_w" in summary
    ):
        del summary["gpu_power_w"]
        summary["gpu_power_note"] = (
            f"gpu_power_w: left empty, the region ({region_s:.3g} s) is shorter than the "
            f"{AVERAGED_POWER_WINDOW_S:g} s NVML averages its power over on this GPU "
            "(no instantaneous power field)"
        )
    return summary


class TelemetrySampler:
    """Polls `read` every `interval_s` on a daemon thread; stop() returns the summary. A reading at
    each edge gives a region shorter than the interval one too."""

    def __init__(
        self,
        read: Callable[[], dict[str, float]],
        interval_s: float = TELEMETRY_INTERVAL_S,
        power_averaged: bool = False,
        note: str = "",
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.read = read
        self.interval_s = interval_s
        # power is NVML's 1 s average: empty for shorter regions
        self.power_averaged = power_averaged
        # what NVML did not answer, said once per run
        self.note = note
        self.clock = clock
        self._start_s = 0.0
        self.samples: list[dict[str, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _poll(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._take()

    def _take(self) -> None:
        try:
            self.samples.append(self.read())
        # a field this GPU does not report: the region keeps what it has
        except Exception:
            pass

    def start(self) -> TelemetrySampler:
        self.samples, self._stop = [], threading.Event()
        self._start_s = self.clock()
        self._take()
        self._thread = threading.Thread(target=self._poll, name="gpubench-telemetry", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._take()
        return summarize_telemetry(self.samples, self.clock() - self._start_s, self.power_averaged)


def gpu_sampler(
    device: torch.device, nvml_loader: Callable[[], Any] = load_nvml
) -> TelemetrySampler | None:
    """A sampler of the fields the GPU answers (None off NVIDIA, without NVML, or with none); `note`
    says what is missing, the busy-GPU check included."""
    if device.type != "cuda":
        return None
    try:
        nvml, handle = nvml_handle(device.index or 0, nvml_loader)
    # no NVML: the rows simply carry no telemetry (the energy note says why)
    except Exception:
        return None
    probe = probe_nvml(nvml, handle)
    _, process_note = running_pids(nvml, handle)
    if not probe.readers:
        return None
    note = "; ".join(filter(None, [probe.note, process_note]))
    return TelemetrySampler(probe.sample, power_averaged=probe.power == "average", note=note)
