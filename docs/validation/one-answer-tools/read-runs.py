"""What five `make bench` consoles say, set side by side: wall time, the plan's first line, the promise line, the
summary's figures; and whether each quiet run's figures fall in the interval the other quiet run printed.
Usage: python read-runs.py OUT (the folder bench-runs.sh filled)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

NUMBER = re.compile(r"^([\d.]+(?:e[+-]?\d+)?) ?(ms|s|TFLOP/s|GB/s)?")
INTERVAL = re.compile(r"\(95% ([\d.]+(?:e[+-]?\d+)?)(?: ?(ms|s))?–([\d.]+(?:e[+-]?\d+)?) ?(ms|s)?")


def seconds(value: float, unit: str | None) -> float:
    return value / 1000 if unit == "ms" else value


def figures(console: str) -> dict[str, str]:
    lines = console.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("gpubench: Answer")), None)
    found = {}
    for line in lines[start + 1:] if start is not None else []:
        if not line.startswith("  "):
            break
        parts = re.split(r"\s{2,}", line.strip(), maxsplit=1)
        if len(parts) == 2:
            found[parts[0]] = parts[1]
    return found


def point_and_interval(value: str) -> tuple[float, tuple[float, float] | None] | None:
    number = NUMBER.match(value)
    if number is None:
        return None
    point = seconds(float(number[1]), number[2])
    interval = INTERVAL.search(value)
    if interval is None:
        return point, None
    low_unit = interval[2] or interval[4]
    return point, (seconds(float(interval[1]), low_unit), seconds(float(interval[3]), interval[4]))


def within(a: str, b: str) -> str:
    """'yes'/'no'/'two groups'/'-' for figure a against b's interval and back."""
    if "two groups" in a and "two groups" in b:
        return "both two groups"
    pa, pb = point_and_interval(a), point_and_interval(b)
    if pa is None or pb is None or pa[1] is None or pb[1] is None:
        return "no interval"
    a_in_b = pb[1][0] <= pa[0] <= pb[1][1]
    b_in_a = pa[1][0] <= pb[0] <= pa[1][1]
    return "yes" if a_in_b and b_in_a else "no"


def main(out: Path) -> None:
    consoles = {path.stem: path.read_text(encoding="utf-8", errors="replace") for path in sorted(out.glob("*.console"))}
    for name, text in consoles.items():
        plan = next((line for line in text.splitlines() if line.startswith("gpubench: plan for")), "")
        promise = [line for line in text.splitlines() if line.startswith(("gpubench: headline", "  ")) and
                   "promised" in line or line.startswith("gpubench: headline left out")]
        print(f"## {name}\n{plan}\n" + "\n".join(promise))
        for figure, value in figures(text).items():
            print(f"  {figure}: {value}")
    quiet = [consoles[name] for name in ("quiet-1", "quiet-2") if name in consoles]
    if len(quiet) == 2:
        first, second = figures(quiet[0]), figures(quiet[1])
        print("## quiet-1 against quiet-2: each figure within the other's interval")
        for figure in sorted(set(first) & set(second)):
            print(f"  {figure}: {within(first[figure], second[figure])}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
