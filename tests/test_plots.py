"""Every plot of a report, rendered from committed runs and checked for what a reader would trip on:
tick labels that overlap, text outside the figure, axis labels that are raw column names, a line
hidden under another of the same style, a legend entry with nothing drawn behind it."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import matplotlib.figure
import matplotlib.text
import numpy as np
import pytest
from matplotlib.transforms import Bbox

from gpubench.reports.build import build_report
from gpubench.reports.plots import KEY

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "reports" / "examples"
RUNS = {
    "example": sorted(EXAMPLES.glob("*.csv")),
    "h200": sorted((EXAMPLES / "h200").glob("*.csv")),
    "model": [ROOT / "tests" / "model_run" / "model-tiny-cnn.csv"],
}
RAW_NAME = re.compile(r"[a-z0-9]+(_[a-z0-9]+)+")  # pct_of_measured_peak, busbw_gbps


def drawn_ticklabels(axis) -> list[matplotlib.text.Text]:
    """The tick labels matplotlib draws: those whose tick lies inside the view (the others exist, undrawn)."""
    low, high = sorted(axis.get_view_interval())
    found = []
    for labels, locs in ((axis.get_majorticklabels(), axis.get_majorticklocs()),
                         (axis.get_minorticklabels(), axis.get_minorticklocs())):
        found += [t for t, loc in zip(labels, locs) if low <= loc <= high and t.get_visible() and t.get_text().strip()]
    return found


def shown_texts(fig: matplotlib.figure.Figure) -> list[matplotlib.text.Text]:
    """Every text a reader sees: titles, axis labels, drawn tick labels, annotations, legends."""
    texts = [fig._suptitle, *fig.texts, *(t for legend in fig.legends for t in legend.get_texts())]
    for ax in [a for a in fig.axes if a.get_visible()]:
        texts += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
        texts += [t for axis in (ax.xaxis, ax.yaxis) for t in (*drawn_ticklabels(axis), axis.get_offset_text())]
    return [t for t in texts if t is not None and t.get_visible() and t.get_text().strip()]


def overlapping(boxes: list[Bbox]) -> bool:
    return any(a.overlaps(b) for a, b in itertools.combinations(boxes, 2))


def has_data(artist: object) -> bool:
    if hasattr(artist, "get_xydata"):
        data = np.asarray(artist.get_xydata(), dtype=float)
        return data.size > 0 and bool(np.isfinite(data).all(axis=-1).any())
    return bool(getattr(artist, "patches", None) or getattr(artist, "get_paths", lambda: [])())


def problems(fig: matplotlib.figure.Figure) -> list[str]:
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    found = []
    page = fig.bbox.padded(1.0)
    for text in shown_texts(fig):
        box = text.get_window_extent(renderer)
        if not (page.contains(box.x0, box.y0) and page.contains(box.x1, box.y1)):
            found.append(f"text outside the figure: {text.get_text()!r}")
    drawn: dict[str, list[object]] = {}
    for ax in [a for a in fig.axes if a.get_visible()]:
        for axis in (ax.xaxis, ax.yaxis):
            labels = drawn_ticklabels(axis)
            if overlapping([t.get_window_extent(renderer).shrunk(0.98, 0.9) for t in labels]):
                found.append(f"tick labels overlap: {[t.get_text() for t in labels]}")
        for label in (ax.get_xlabel(), ax.get_ylabel()):
            if RAW_NAME.fullmatch(label):
                found.append(f"axis label is a column name: {label!r}")
        styles = [(line.get_color(), line.get_marker(), line.get_linestyle()) for line in ax.lines
                  if not line.get_label().startswith("_")]
        if len(styles) != len(set(styles)):
            found.append(f"two lines of one style in a panel ({ax.get_title()!r}): one can hide the other")
        for artist in [*ax.lines, *ax.containers, *ax.collections]:
            drawn.setdefault(str(artist.get_label()), []).append(artist)
    for legend in fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]:
        for handle, text in zip(legend.legend_handles, legend.get_texts()):
            if handle is not None and handle.get_gid() == KEY:
                continue
            if not any(has_data(artist) for artist in drawn.get(text.get_text(), [])):
                found.append(f"legend entry with nothing drawn: {text.get_text()!r}")
    return found


@pytest.mark.parametrize("runs", list(RUNS), ids=list(RUNS))
def test_every_plot_of_a_report_reads_cleanly(runs, tmp_path, monkeypatch):
    seen: dict[str, list[str]] = {}
    save = matplotlib.figure.Figure.savefig

    def checked_save(fig, target, *args, **kwargs):  # the PNG's name is a temporary's: the figure's titles name it
        titles = [t.get_text() for t in (fig._suptitle, *(ax.title for ax in fig.axes)) if t is not None
                  and t.get_text()]
        seen[f"{len(seen)}: {' / '.join(titles[:2])}"] = problems(fig)
        return save(fig, target, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", checked_save)
    build_report(RUNS[runs], tmp_path / "report", baseline=None)
    assert len(seen) >= {"example": 6, "h200": 10, "model": 1}[runs]
    assert {name: found for name, found in seen.items() if found} == {}


def test_the_checks_catch_what_they_look_for():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot(range(40), range(40), color="C0", marker="o", label="a")
    ax.plot(range(40), range(40), color="C0", marker="o", label="b")  # b under a, drawn alike
    ax.plot([], [], label="ghost")
    ax.set_xticks(range(0, 40, 2), [f"{10000 * i}" for i in range(0, 40, 2)])
    ax.set_ylabel("busbw_gbps")
    fig.text(0.99, 0.5, "a note that runs off the page")
    fig.legend()
    kinds = {f.split(":")[0].split(" (")[0] for f in problems(fig)}
    plt.close(fig)
    assert kinds == {"text outside the figure", "tick labels overlap", "axis label is a column name",
                     "two lines of one style in a panel", "legend entry with nothing drawn"}
