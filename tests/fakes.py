"""Test doubles shared by the unit tests."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from harness.context import BuildContext
from harness.fixture import benchmark_rounds
from harness.results import ResultsWriter
from harness.runner import run_case
from harness.workload import as_workload


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

    def pedantic(self, target: Callable[[], Any], rounds: int, iterations: int, warmup_rounds: int = 0) -> Any:
        self.calls.append((rounds, iterations))
        self.stats = FakeMetadata()
        result = None
        for i in range(rounds):
            for _ in range(iterations):
                result = target()
            self.stats.stats.data.append(self.samples_s[i % len(self.samples_s)])
        if iterations > 1:  # as pytest-benchmark does: one more call after the rounds, for the result
            result = target()
        return result


class FakeNvml:
    """Stands in for pynvml: an energy counter (mJ) the test moves by hand, and telemetry readings
    (SM clock, temperature, power, throttle-reason bits) it sets."""

    NVML_CLOCK_SM = 0
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, energy_mj: int = 1_000_000, supports_energy: bool = True) -> None:
        self.energy_mj = energy_mj
        self.supports_energy = supports_energy
        self.sm_clock_mhz, self.temp_c, self.power_mw, self.throttle_bits = 1980, 45, 300_000, 0

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return f"gpu{index}"

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: str) -> int:
        if not self.supports_energy:
            raise RuntimeError("Not Supported")
        return self.energy_mj

    def nvmlDeviceGetClockInfo(self, handle: str, kind: int) -> int:
        return self.sm_clock_mhz

    def nvmlDeviceGetTemperature(self, handle: str, kind: int) -> int:
        return self.temp_c

    def nvmlDeviceGetPowerUsage(self, handle: str) -> int:
        return self.power_mw

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: str) -> int:
        return self.throttle_bits


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


def run_with(case: Any, workload: Any, benchmark: Any, ctx: RunContext, build_index: int = 0) -> dict[str, Any]:
    """run_case as the gpubench fixture calls it: pytest-benchmark (a fake) drives the rounds."""
    record = ctx.writer.append if ctx.writer is not None else None
    return run_case(case, as_workload(workload), replace(ctx.build, build_index=build_index), ctx.base_row, record,
                    rounds=benchmark_rounds(benchmark), untimed=benchmark.disabled)
