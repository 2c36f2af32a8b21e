"""The file that names a build's cases (its plan's `cases`, written by `gpubench ab` between pairs):
a case id a line, optionally followed by the timed seconds of that case's build."""

from __future__ import annotations

import math
from pathlib import Path

# --build-seconds' own bound
MOST_CASE_BUILD_S = 60.0


def cases_text(cases: list[str], seconds: dict[str, float]) -> str:
    return "".join(
        f"{case} {seconds[case]}\n" if case in seconds else f"{case}\n" for case in cases
    )


def read_cases_file(path: Path) -> dict[str, float | None]:
    """case -> its build seconds (None: the session's own); ValueError names a bad line."""
    cases: dict[str, float | None] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        try:
            seconds = float(fields[1]) if len(fields) == 2 else None
        except ValueError:
            seconds = math.nan
        if len(fields) > 2 or (seconds is not None and not 0 < seconds <= MOST_CASE_BUILD_S):
            raise ValueError(
                f"line {number} {line.strip()!r} is not 'CASE' or 'CASE SECONDS' with seconds in "
                f"(0, {MOST_CASE_BUILD_S:.0f}]"
            )
        cases[fields[0]] = seconds
    return cases
