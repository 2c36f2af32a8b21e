"""Durations as a person writes and reads them (no torch): '90s', '4m', '1h30m' to seconds and
back."""

from __future__ import annotations

import math
import re

from gpubench.harness.core.exits import UsageError

UNITS_S = {"s": 1.0, "m": 60.0, "h": 3600.0}
DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([smh])", re.ASCII)
NO_BUDGET = ("none", "off", "unlimited")
# A week: longer is no budget at all, and a timer of 1e300 s overflows.
MAX_BUDGET_S = 7 * 24 * 3600.0
# The least --budget a run accepts: a `gpubench run`'s first build reaches its first case 3-4 s
# after the run starts on a 2-core VM (an interpreter with torch, the collection, the look at the
# machine, the cost model's probe); at 4 s no case got any of it, at 5 s three of four smoke matmuls
# were measured.
MIN_BUDGET_S = 5.0


def parse_duration(text: str | float | None, flag: str = "--budget") -> float | None:
    """Seconds from '90s', '4m', '1.5h', '1h30m'; None for 'none'. A bare number is refused: seconds
    or minutes?"""
    if text is None or isinstance(text, (int, float)):
        return None if text is None else float(text)
    cleaned = text.strip().lower()
    if cleaned in NO_BUDGET:
        return None
    parts = DURATION_PART.findall(cleaned)
    whole = bool(parts) and "".join(number + unit for number, unit in parts) == cleaned
    units = [UNITS_S[unit] for _, unit in parts]
    # 1h30m, not 1h1h (2 h?) nor 30m1h
    whole = whole and units == sorted(set(units), reverse=True)
    seconds = sum(float(number) * UNITS_S[unit] for number, unit in parts) if whole else 0.0
    if not 0 < seconds < math.inf:
        raise UsageError(
            f"{flag} {text[:40]!r}: use a duration such as 90s, 4m, 1h or 1h30m "
            "(or none for no limit)"
        )
    if seconds > MAX_BUDGET_S:
        raise UsageError(
            f"{flag} {text[:40]!r}: at most {MAX_BUDGET_S // 3600:.0f}h — use none for no limit"
        )
    return seconds


def parse_budget(text: str | float | None) -> float | None:
    """--budget in seconds (None: no limit); below MIN_BUDGET_S it is one line naming the least
    accepted."""
    seconds = parse_duration(text)
    if seconds is not None and seconds < MIN_BUDGET_S:
        raise UsageError(
            f"--budget {str(text)[:40]}: below {format_duration(MIN_BUDGET_S)}, too short for a "
            f"build to start and build one case — pass --budget {MIN_BUDGET_S:g}s or more (or "
            "none for no limit)"
        )
    return seconds


def format_duration(seconds: float) -> str:
    """'12 ms', '25 s', '2.1 s', '3m', '2m31s', '1h05m': short, and whole where it can be (never
    '0.0 s' for a time that was measured)."""
    if 0 < seconds < 0.1:
        return f"{seconds * 1000:.2g} ms"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, rest_s = divmod(round(seconds), 60)
    if minutes >= 60:
        return f"{minutes // 60}h{minutes % 60:02d}m"
    return f"{minutes}m" if rest_s == 0 else f"{minutes}m{rest_s:02d}s"
