"""The one noise line of `gpubench run` and `gpubench ab` (gpubench.reports.judge.noise decides it,
gpubench.reports.render.noise says it): when builds disagree, what was seen on the machine, what it
costs in resolution and the knob to try."""

from __future__ import annotations

import pandas as pd

from gpubench.harness.processes.cpu_readings import CpuWatch
from gpubench.reports.judge.noise import Readings
from gpubench.reports.render.noise import noise_line
from gpubench.harness.core.console import CONSOLE


def print_noise_line(
    frame: pd.DataFrame,
    watch: CpuWatch,
    detectable: float | None = None,
    group: tuple[str, ...] = ("case_id",),
) -> str | None:
    """Prints the line when the builds disagree; returns it (None when they agree)."""
    if frame.empty:
        return None
    line = noise_line(frame, Readings(watch.steal_frac(), watch.load_avg()), detectable, group)
    if line is not None:
        CONSOLE.say(line)
    return line


def sides_frame(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """A session's two sides as one frame, told apart by a `side` column (each side's builds are its
    own)."""
    return pd.concat([a.assign(side="A"), b.assign(side="B")], ignore_index=True)
