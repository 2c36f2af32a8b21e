"""What a person sees per finished case: one line with the status, median and the workload's
headline figures."""

from __future__ import annotations

import re
from typing import Any

from gpubench.harness.core.flags import BUSY
from gpubench.harness.catalog import spec_for

COMMON_HEADLINES = (("energy_j", "{:.3g} J"), ("avg_power_w", "{:.3g} W"))
# a user's own workload (gpubench.measure(..., work=...)) declares no headlines: the rates its work
# gives
USER_HEADLINES = (
    ("samples_per_s", "{:.4g} samples/s"),
    ("tflops", "{:.3g} TFLOP/s"),
    ("gbps", "{:.3g} GB/s"),
)


def headlines(workload: str) -> tuple[tuple[str, str], ...]:
    spec = spec_for(workload)
    return (spec.headlines if spec else USER_HEADLINES) + COMMON_HEADLINES


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def summary_line(row: dict[str, Any]) -> str:
    build = f" [build {row['build'] + 1}/{row['builds']}]" if row.get("builds", 1) > 1 else ""
    # past the profile's builds, with a budget's time left
    if row.get("build", 0) >= row.get("builds", 1) > 1:
        build = f" [extra build {row['build'] + 1}]"
    if row.get("status") != "ok":
        return f"{row['case_id']}{build}: {row['status']} — {row.get('reason', '')}"
    flags = f" [{shown_flags(row)}]" if row.get("flags") else ""
    line = (
        f"{row['case_id']}{build}: median {median_text(row)} over {row['rounds']} sample(s){flags}"
    )
    return line + figures_text(row)


def short_line(row: dict[str, Any]) -> str:
    """A measured case in a few words: its median, flags and headline figures (the run's console,
    one per case)."""
    flags = f" [{shown_flags(row)}]" if row.get("flags") else ""
    return f"{row['case_id']}: {median_text(row)}{flags}" + figures_text(row)


def median_text(row: dict[str, Any]) -> str:
    median_s = row["median_s"]
    return f"{median_s:.3g} s" if median_s >= 1 else f"{median_s * 1e3:.3g} ms"


def figures_text(row: dict[str, Any]) -> str:
    """`; 0.41 TFLOP/s, 2.17e+04 samples/s`, or '' for a workload that declares no headline
    figure."""
    figures = [
        fmt.format(row[key])
        for key, fmt in headlines(str(row.get("workload")))
        if _number(row.get(key))
    ]
    return f"; {', '.join(figures)}" if figures else ""


def shown_flags(row: dict[str, Any]) -> str:
    """The row's flags, `busy` with the share of the machine others took (the flag alone does not
    say how much)."""
    busy_frac = row.get("cpu_busy_frac")
    return ", ".join(
        f"busy {busy_frac:.0%}"
        if flag == BUSY and _number(busy_frac) and busy_frac >= 0.005
        else flag
        for flag in str(row["flags"]).split(";")
        if flag
    )


# torch's C++ warnings end with the source line that raised them (torch's build tree): noise in a
# row's reason.
TRIGGERED_AT = re.compile(r"\s*\(Triggered internally at [^)]*\)")


def torch_said(message: object) -> str:
    """One line of what a torch warning says, without the C++ source location it ends with."""
    return " ".join(TRIGGERED_AT.sub("", str(message)).split())


def one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return f"{type(error).__name__}: {text}"[:300]
