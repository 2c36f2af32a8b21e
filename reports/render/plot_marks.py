"""What a plot adds over its lines so none is misread: a break where the measured sizes leave more
than a decade between them (no line drawn over sizes never measured: a crossover there would be
invented), a cross on each point measured while another process was busy, and the legend's key for
it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpubench.harness.core.workload_spec import PlotSpec
from gpubench.reports.judge.settled import is_busy
from gpubench.reports.render.drawing import plt

# neighbouring sizes further apart than this are two points, not one line
GAP_RATIO = 10.0
BUSY_LABEL = "x: measured while another process was busy"
BUSY_STYLE = {"linestyle": "none", "marker": "x", "color": "red", "markersize": 8, "zorder": 5}


def broken_at_gaps(
    xs: pd.Series, ys: pd.Series, ratio: float = GAP_RATIO
) -> tuple[np.ndarray, np.ndarray]:
    """The points in x order with a NaN between two whose sizes are over `ratio` apart: the line
    stops there."""
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if len(x) < 2:
        return x, y
    with np.errstate(divide="ignore", invalid="ignore"):
        gaps = np.flatnonzero(np.abs(x[1:] / x[:-1]) > ratio) + 1
    return np.insert(x, gaps, np.nan), np.insert(y, gaps, np.nan)


def mark_busy(ax: plt.Axes, rows: pd.DataFrame, x: str, y: str) -> bool:
    """A cross on each busy point of `rows`; True where one was drawn."""
    busy = rows[is_busy(rows)]
    if busy.empty:
        return False
    ax.plot(busy[x], busy[y], label="_busy", **BUSY_STYLE)
    return True


def busy_key(gid: str) -> plt.Line2D:
    """The legend's entry for the crosses, marked `gid` (an entry that explains a mark, not a
    series)."""
    return plt.Line2D([], [], label=BUSY_LABEL, gid=gid, **BUSY_STYLE)


def plotted_rows(rows: pd.DataFrame, spec: PlotSpec) -> pd.DataFrame:
    """The rows a declared plot can place: both its x and its y given (none where either column is
    missing)."""
    if not {spec.x, spec.y} <= set(rows.columns):
        return rows.iloc[0:0]
    return rows.dropna(subset=[spec.x, spec.y])
