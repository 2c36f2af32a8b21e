"""The energy columns of a measured case: joules per call, average power, work per joule, and the
repetition that fills a counter window too long for the case's own rounds."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from harness.devices.energy import EnergyMeter, EnergyReading
from harness.measurement.measure import Measurement, Timed
from harness.measurement.timing import SyncedClock

MAX_ENERGY_CALLS = 1_000_000


# The first batch, sized from the rounds' median, aims at 80% of the window: a median that came out
# short would otherwise overshoot by as much. The calls added then aim 5% past the window.
FIRST_BATCH_SHARE = 0.8
MISSING_CALLS_MARGIN = 1.05


def energy_by_repetition(fn: Callable[[], Any], median_s: float, meter: EnergyMeter, clock: SyncedClock) -> EnergyReading:
    """A region too short for the counter, measured again for energy only: calls until the
    counter's window is filled; the reading is per call. The first batch is sized from `median_s`
    to most of the window; the missing calls are then added, sized from the time per call just
    measured (back-to-back calls run faster than rounds that each end in a sync) — not the whole batch
    again, which ran the region about twice as long as the window (seconds of full power on a GPU)."""
    window_s = meter.min_window_s * 1.2
    per_call_s = max(median_s, 1e-9)
    calls, elapsed_s = 0, 0.0
    clock()
    mark, start_s = meter.start(), clock()
    while elapsed_s < window_s and calls < MAX_ENERGY_CALLS:
        margin = MISSING_CALLS_MARGIN if calls else FIRST_BATCH_SHARE
        batch = min(MAX_ENERGY_CALLS - calls, max(1, math.ceil((window_s - elapsed_s) * margin / per_call_s)))
        for _ in range(batch):
            fn()
        calls += batch
        elapsed_s = clock() - start_s  # synced: the device's queue is part of the time
        per_call_s = max(elapsed_s / calls, 1e-9)
    reading = meter.stop(mark)
    return EnergyReading(reading.energy_j / calls if reading.energy_j is not None else None, reading.seconds / calls, reading.source, reading.reason)


def energy_figures(reading: EnergyReading, calls: int, out: dict[str, Any], samples_per_call: int | None = None) -> dict[str, Any]:
    """energy_j per call of the timed function (one matmul, one epoch, one run to target), the
    region's average power, and work per joule: TFLOP/s over watts (the region is all matmul), and
    samples over joules — of the call when its samples are known, else samples/s over watts."""
    if reading.energy_j is None:
        return {"energy_source": reading.source or None}
    power_w = reading.avg_power_w
    energy_j = reading.energy_j / calls
    figures: dict[str, Any] = {"energy_j": energy_j, "avg_power_w": power_w, "energy_source": reading.source}
    if power_w:
        if isinstance(out.get("tflops"), (int, float)):
            figures["tflop_per_j"] = out["tflops"] / power_w
        if samples_per_call:
            figures["samples_per_j"] = samples_per_call / energy_j
        elif isinstance(out.get("samples_per_s"), (int, float)):
            figures["samples_per_j"] = out["samples_per_s"] / power_w
    return figures


def energy_columns(timed: Timed, measured: Measurement, meter: EnergyMeter, clock: SyncedClock, first_build: bool,
                   out: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The energy and telemetry columns of a measured case, and the reasons a reader must see.
    A region too short for the counter is repeated for its energy in the first build of a case
    only: on a GPU (1 s window) every later build would add over a second of full-power work."""
    telemetry = dict(measured.telemetry)
    slowdown = telemetry.pop("gpu_slowdown", "")
    power_note = telemetry.pop("gpu_power_note", "")
    notes = [f"throttled during the timed region: {slowdown.replace(';', ', ')}"] if slowdown else []
    notes += [power_note] if power_note else []
    if not timed.energy:
        return dict(telemetry, energy_source=None), ([timed.energy_note] if timed.energy_note and meter.available else []) + notes
    reading, calls = measured.energy, measured.calls
    if reading.energy_j is None and reading.source and timed.repeatable and first_build:
        reading, calls = energy_by_repetition(timed.fn, measured.stats.median_s, meter, clock), 1
    columns = energy_figures(reading, calls, out, timed.samples_per_call)
    if timed.energy_alias and columns.get("energy_j") is not None:
        columns[timed.energy_alias] = columns["energy_j"]
    columns.update(telemetry)
    if reading.reason and columns.get("energy_j") is None:
        notes.insert(0, reading.reason + (" (measured once per case, in its first build)" if timed.repeatable else ""))
    return columns, notes
