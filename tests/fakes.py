"""Test doubles shared by the unit tests."""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any
from collections.abc import Callable

from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.pytest_plugin.fixture import benchmark_rounds
from gpubench.harness.records.results import ResultsWriter
from gpubench.harness.measurement.runner import run_case
from gpubench.harness.measurement.workload import as_workload


class FakeStats:
    def __init__(self) -> None:
        self.data: list[float] = []


class FakeMetadata:
    def __init__(self) -> None:
        self.stats = FakeStats()


class FakeBenchmark:
    """Stands in for pytest-benchmark's fixture: pedantic() runs the rounds and records the
    per-call samples given (a fake clock), so statistics can be checked by hand."""

    def __init__(self, samples_s: list[float] | None = None) -> None:
        self.samples_s = samples_s or [0.001, 0.002, 0.003]
        self.extra_info: dict[str, Any] = {}
        self.disabled = False
        self.group = None
        self.stats: FakeMetadata | None = None
        self.calls: list[tuple[int, int]] = []

    def pedantic(
        self, target: Callable[[], Any], rounds: int, iterations: int, warmup_rounds: int = 0
    ) -> Any:
        self.calls.append((rounds, iterations))
        self.stats = FakeMetadata()
        result = None
        for i in range(rounds):
            for _ in range(iterations):
                result = target()
            self.stats.stats.data.append(self.samples_s[i % len(self.samples_s)])
        # as pytest-benchmark does: one more call after the rounds, for the result
        if iterations > 1:
            result = target()
        return result


# pynvml's own name
class NVMLError_NotSupported(Exception):
    """What pynvml raises for a field or query this GPU (or VM) does not support."""

    def __str__(self) -> str:
        return "Not Supported"


class FakeNvml:
    """Stands in for pynvml: an energy counter (mJ) the test moves by hand, and telemetry readings
    (SM clock, temperature, power, throttle-reason bits) it sets. Any method named in
    `not_supported` raises NotSupported, as one field of a real GPU in a VM does; the
    instantaneous power field answers only when `instant_power_mw` is set."""

    NVML_CLOCK_SM = 0
    NVML_CLOCK_MEM = 1
    NVML_TEMPERATURE_GPU = 0
    NVML_FI_DEV_POWER_INSTANT = 186

    def __init__(
        self,
        energy_mj: int = 1_000_000,
        supports_energy: bool = True,
        not_supported: tuple[str, ...] = (),
        instant_power_mw: int | None = None,
        pids: tuple[int, ...] = (),
    ) -> None:
        self.energy_mj = energy_mj
        self.not_supported = set(not_supported) | (
            set() if supports_energy else {"nvmlDeviceGetTotalEnergyConsumption"}
        )
        self.sm_clock_mhz, self.temp_c, self.power_mw, self.throttle_bits = 1980, 45, 300_000, 0
        self.instant_power_mw = instant_power_mw
        self.pids = pids

    def _answer(self, name: str, value: Any) -> Any:
        if name in self.not_supported:
            raise NVMLError_NotSupported()
        return value

    # as a stand-in for the pynvml module itself
    def nvmlInit(self) -> None:
        return None

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return f"gpu{index}"

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: str) -> int:
        return self._answer("nvmlDeviceGetTotalEnergyConsumption", self.energy_mj)

    def nvmlDeviceGetClockInfo(self, handle: str, kind: int) -> int:
        return self._answer("nvmlDeviceGetClockInfo", self.sm_clock_mhz)

    def nvmlDeviceGetTemperature(self, handle: str, kind: int) -> int:
        return self._answer("nvmlDeviceGetTemperature", self.temp_c)

    def nvmlDeviceGetPowerUsage(self, handle: str) -> int:
        return self._answer("nvmlDeviceGetPowerUsage", self.power_mw)

    def nvmlDeviceGetPowerManagementLimit(self, handle: str) -> int:
        return self._answer("nvmlDeviceGetPowerManagementLimit", 700_000)

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: str) -> int:
        return self._answer("nvmlDeviceGetCurrentClocksThrottleReasons", self.throttle_bits)

    def nvmlDeviceGetFieldValues(self, handle: str, field_ids: list[int]) -> list[Any]:
        """pynvml's c_nvmlFieldValue_t: a per-field status, a value type (1 = unsigned int) and a
        union."""
        self._answer("nvmlDeviceGetFieldValues", None)
        # NVML_ERROR_NOT_SUPPORTED for this field only
        status = 3 if self.instant_power_mw is None else 0
        return [
            SimpleNamespace(
                fieldId=f,
                nvmlReturn=status,
                valueType=1,
                value=SimpleNamespace(uiVal=self.instant_power_mw or 0),
            )
            for f in field_ids
        ]

    def nvmlDeviceGetComputeRunningProcesses(self, handle: str) -> list[Any]:
        return self._answer(
            "nvmlDeviceGetComputeRunningProcesses", [SimpleNamespace(pid=pid) for pid in self.pids]
        )

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: str) -> list[Any]:
        return self._answer("nvmlDeviceGetGraphicsRunningProcesses", [])


class SteppingClock:
    """A host clock that moves only when told (seconds)."""

    def __init__(self, now_s: float = 100.0) -> None:
        self.now_s = now_s

    def __call__(self) -> float:
        return self.now_s


@dataclass
class RunContext:
    """A build context, the run's base row and where its rows go: what the plugin's session hands
    the runner, for tests that drive `run_case` directly."""

    build: BuildContext
    base_row: dict[str, Any]
    writer: ResultsWriter | None


def run_with(
    case: Any, workload: Any, benchmark: Any, ctx: RunContext, build_index: int = 0
) -> dict[str, Any]:
    """run_case as the gpubench fixture calls it: pytest-benchmark (a fake) drives the rounds."""
    record = ctx.writer.append if ctx.writer is not None else None
    return run_case(
        case,
        as_workload(workload),
        replace(ctx.build, build_index=build_index),
        ctx.base_row,
        record,
        rounds=benchmark_rounds(benchmark),
        untimed=benchmark.disabled,
    )
