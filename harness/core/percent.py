"""A share as a percentage that keeps a small one's digits: an MFU of 0.04% is a real figure, and
"0%" reads as none. Torch-free: the catalogue's summary cells and the report's tables both print
shares with it."""

from __future__ import annotations

import math

# significant digits of a share below 1%
SMALL_DIGITS = 2


def percent(share: float, decimals: int = 0) -> str:
    """`share` (0.57 is 57%) with `decimals` places from 1% up; below 1%, two significant digits at
    most (0.00042 -> 0.042%)."""
    value = 100 * share
    if value == 0 or not math.isfinite(value) or abs(value) >= 1:
        return f"{value:.{decimals}f}%"
    places = SMALL_DIGITS - 1 - math.floor(math.log10(abs(value)))
    # 0.04%, not 0.040%
    return f"{value:.{places}f}".rstrip("0").rstrip(".") + "%"
