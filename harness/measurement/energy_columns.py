"""The energy columns of a measured case: joules per call, average power, work per joule."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpubench.harness.core.flags import THROTTLED
from gpubench.harness.devices.energy import EnergyMeter, EnergyReading
from gpubench.harness.measurement.measure import Measurement, Timed


def energy_figures(
    reading: EnergyReading, calls: int, out: Mapping[str, Any], samples_per_call: int | None = None
) -> dict[str, Any]:
    """energy_j per call, the region's average power, and work per joule: TFLOP/s over watts (the
    region is all matmul), samples per joule of the call where known, else samples/s over watts."""
    if reading.energy_j is None:
        return {"energy_source": reading.source or None}
    power_w = reading.avg_power_w
    energy_j = reading.energy_j / calls
    figures: dict[str, Any] = {
        "energy_j": energy_j,
        "avg_power_w": power_w,
        "energy_source": reading.source,
    }
    if power_w:
        if isinstance(out.get("tflops"), (int, float)):
            figures["tflop_per_j"] = out["tflops"] / power_w
        if samples_per_call:
            figures["samples_per_j"] = samples_per_call / energy_j
        elif isinstance(out.get("samples_per_s"), (int, float)):
            figures["samples_per_j"] = out["samples_per_s"] / power_w
    return figures


def energy_columns(
    timed: Timed, measured: Measurement, meter: EnergyMeter, out: Mapping[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """The energy and telemetry columns of a measured case, and the reasons a reader must see."""
    telemetry = dict(measured.telemetry)
    slowdown = telemetry.pop("gpu_slowdown", "")
    power_note = telemetry.pop("gpu_power_note", "")
    notes = (
        [f"{THROTTLED} during the timed region: {slowdown.replace(';', ', ')}"] if slowdown else []
    )
    notes += [power_note] if power_note else []
    if not timed.energy:
        note = [timed.energy_note] if timed.energy_note and meter.available else []
        return dict(telemetry, energy_source=None), note + notes
    reading, calls = measured.energy, measured.calls
    figures = energy_figures(reading, calls, out, timed.samples_per_call)
    energy_j = figures.get("energy_j")
    alias = {timed.energy_alias: energy_j} if timed.energy_alias and energy_j is not None else {}
    if reading.reason and energy_j is None:
        notes.insert(0, reading.reason)
    return {**figures, **alias, **telemetry}, notes
