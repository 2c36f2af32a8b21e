"""Values in their unit (from the schema's columns) at a readable scale, for report tables and
compare lines."""

from __future__ import annotations

import math
from typing import Any

from gpubench.harness.core.percent import percent
from gpubench.harness.records.schema import BY_NAME

_SCALES: dict[str, tuple[tuple[float, str], ...]] = {
    "s": ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns")),
    "bytes": ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "B")),
    "samples/s": ((1e6, "M samples/s"), (1e3, "k samples/s"), (1, "samples/s")),
}


def human(value: Any, unit: str) -> str:
    """A value in its unit at a readable scale: 0.0123 s -> '12.3 ms', 1614901248 bytes -> '1.5
    GiB'."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if unit == "frac":
        # an MFU of 0.04% keeps its digits
        return percent(value, 1) if abs(value) < 10 else f"{value:.3g}"
    for scale, name in _SCALES.get(unit, ()):
        if abs(value) >= scale or scale == _SCALES[unit][-1][0]:
            return f"{value / scale:.3g} {name}"
    if unit == "x":
        return f"{value:.3g}x"
    if unit == "%":
        return percent(value / 100, 1)
    text = f"{value:.3g}" if isinstance(value, float) else str(value)
    return f"{text} {unit}".strip()


# A figure the report derives, not a column of the schema, says its unit in its name's end.
SUFFIX_UNITS = {"_s": "s", "_pct": "%", "_bytes": "bytes"}


def unit_of(column: str) -> str:
    """The schema's unit of `column`, else the one its name ends in (`compiled_step_s`: s)."""
    spec = BY_NAME.get(column)
    if spec is not None:
        return spec.unit
    return next((unit for end, unit in SUFFIX_UNITS.items() if column.endswith(end)), "")


def human_column(column: str, value: Any) -> str:
    return human(value, unit_of(column))
