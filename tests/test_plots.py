"""Every plot of a report, rendered from committed runs and checked for what a reader would trip on:
tick labels that overlap, text outside the figure, axis labels that are raw column names, a line
hidden under another of the same style, a legend entry with nothing drawn behind it or unlike what
it names, a series or a shaded band the legend does not name, a legend as tall as its panels, a log
axis with one number, a marker cut by the frame, categories joined by a line, bytes in powers of
ten, panels of one quantity on two scales; and the history's axes: a relative window over the runs'
own span."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import matplotlib.collections
import matplotlib.colors
import matplotlib.container
import matplotlib.figure
import matplotlib.lines
import matplotlib.text
import matplotlib.ticker
import numpy as np
import pandas as pd
import pytest
from matplotlib.transforms import Bbox

from gpubench.harness.core.workload_spec import PlotSpec
from gpubench.reports.render import bar_plots, plots
from gpubench.reports.render import history
from gpubench.reports.render.build import build_report
from gpubench.reports.render.plot_marks import BUSY_LABEL
from gpubench.reports.render.plots import IQR_LABEL, KEY

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "reports" / "examples"
RUNS = {
    "example": sorted(EXAMPLES.glob("*.csv")),
    "h200": sorted((EXAMPLES / "h200").glob("*.csv")),
    "model": [ROOT / "tests" / "model_run" / "model-tiny-cnn.csv"],
}
# pct_of_measured_peak, busbw_gbps
RAW_NAME = re.compile(r"[a-z0-9]+(_[a-z0-9]+)+")
# 32 MiB, 1.5 GiB: what the tables write
BINARY_BYTES = re.compile(r"\d+(\.\d+)? (B|KiB|MiB|GiB|TiB)")
NO_LINE = ("None", "none", "", " ")


def drawn_ticklabels(axis) -> list[matplotlib.text.Text]:
    """The tick labels matplotlib draws: those whose tick lies inside the view (the others exist,
    undrawn)."""
    low, high = sorted(axis.get_view_interval())
    found = []
    for labels, locs in (
        (axis.get_majorticklabels(), axis.get_majorticklocs()),
        (axis.get_minorticklabels(), axis.get_minorticklocs()),
    ):
        found += [
            t
            for t, loc in zip(labels, locs)
            if low <= loc <= high and t.get_visible() and t.get_text().strip()
        ]
    return found


def shown_axes(fig: matplotlib.figure.Figure) -> list:
    """The visible panels and the axes drawn on them (a second y axis on the right)."""
    return [
        a for ax in fig.axes if ax.get_visible() for a in (ax, *ax.child_axes) if a.get_visible()
    ]


def shown_texts(fig: matplotlib.figure.Figure) -> list[matplotlib.text.Text]:
    """Every text a reader sees: titles, axis labels, drawn tick labels, annotations, legends."""
    texts = [fig._suptitle, *fig.texts, *(t for legend in fig.legends for t in legend.get_texts())]
    for ax in shown_axes(fig):
        texts += [
            ax.title,
            ax._left_title,
            ax._right_title,
            ax.xaxis.label,
            ax.yaxis.label,
            *ax.texts,
        ]
        texts += [
            t
            for axis in (ax.xaxis, ax.yaxis)
            for t in (*drawn_ticklabels(axis), axis.get_offset_text())
        ]
    return [t for t in texts if t is not None and t.get_visible() and t.get_text().strip()]


def overlapping(boxes: list[Bbox]) -> bool:
    return any(a.overlaps(b) for a, b in itertools.combinations(boxes, 2))


def has_data(artist: object) -> bool:
    if hasattr(artist, "get_xydata"):
        data = np.asarray(artist.get_xydata(), dtype=float)
        return data.size > 0 and bool(np.isfinite(data).all(axis=-1).any())
    return bool(getattr(artist, "patches", None) or getattr(artist, "get_paths", lambda: [])())


def categorical(axis) -> bool:
    """Categories on an axis: fixed ticks at 0, 1, 2 ... (a numeric axis places its ticks by a
    locator)."""
    locs = list(axis.get_majorticklocs())
    return isinstance(axis.get_major_locator(), matplotlib.ticker.FixedLocator) and locs == list(
        range(len(locs))
    )


def marker_outside(ax, line: matplotlib.lines.Line2D) -> bool:
    """A marker of `line` cut by the frame of `ax` (or past it, not drawn at all)."""
    if line.get_marker() in (None, "", "None", "none", " ") or not line.get_visible():
        return False
    points = np.asarray(line.get_xydata(), dtype=float)
    points = ax.transData.transform(points[np.isfinite(points).all(axis=1)])
    # px, a half-px slack
    reach = (line.get_markersize() + line.get_markeredgewidth()) / 2 * ax.figure.dpi / 72 - 0.5
    frame = ax.bbox
    return bool(
        (
            (points[:, 0] - reach < frame.x0)
            | (points[:, 0] + reach > frame.x1)
            | (points[:, 1] - reach < frame.y0)
            | (points[:, 1] + reach > frame.y1)
        ).any()
    )


def axis_problems(ax) -> list[str]:
    """One panel: log axes with one number, bytes in powers of ten, markers cut, categories
    joined."""
    found = []
    for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
        labels = [t.get_text() for t in drawn_ticklabels(axis)]
        shared = len(getattr(ax, f"get_shared_{name}_axes")().get_siblings(ax)) > 1
        # numbers on a neighbour
        if axis.get_scale() == "log" and len(labels) < 2 and not (shared and not labels):
            found.append(
                f"log axis with fewer than two numbers ({ax.get_title()!r} {name}): {labels}"
            )
        if "bytes" in axis.label.get_text() and not all(
            BINARY_BYTES.fullmatch(text) for text in labels
        ):
            found.append(f"bytes not in binary units ({ax.get_title()!r}): {labels}")
    if any(marker_outside(ax, line) for line in ax.lines):
        found.append(f"marker cut by the frame ({ax.get_title()!r})")
    if categorical(ax.xaxis) and any(
        line.get_linestyle() not in NO_LINE and len(line.get_xdata()) > 1 for line in ax.lines
    ):
        found.append(f"categories joined by a line ({ax.get_title()!r})")
    # a ladder over sizes
    if ax.get_xscale() == "log" and any(joins_a_gap(line) for line in ax.lines):
        found.append(f"a line across more than a decade never measured ({ax.get_title()!r})")
    return found


def joins_a_gap(line: matplotlib.lines.Line2D) -> bool:
    """Two neighbouring points of a drawn line more than 10x apart in x, with nothing between
    them."""
    if line.get_linestyle() in NO_LINE:
        return False
    x = np.asarray(line.get_xdata(), dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.abs(x[1:] / x[:-1])
    return bool((np.isfinite(ratios) & (ratios > 10)).any())


def scale_problems(panels: list) -> list[str]:
    """Panels of one quantity (one axis label) on different scales: a point above another may be the
    smaller."""
    found = []
    for name in ("x", "y"):
        scales: dict[str, set[tuple[float, float]]] = {}
        for ax in panels:
            axis = getattr(ax, f"{name}axis")
            if axis.label.get_text() and not categorical(axis):
                scales.setdefault(axis.label.get_text(), set()).add(
                    tuple(np.round(axis.get_view_interval(), 9))
                )
        found += [
            f"panels of {label!r} on {len(limits)} {name} scales"
            for label, limits in scales.items()
            if len(limits) > 1
        ]
    return found


def looks_alike(handle, artist) -> bool:
    """A legend entry drawn as the series it names: a line's colour and marker, a bar's fill."""

    def colour(value) -> tuple[float, ...]:
        return matplotlib.colors.to_rgba(value)

    if hasattr(artist, "get_marker") and hasattr(handle, "get_marker"):
        return (
            colour(handle.get_color()) == colour(artist.get_color())
            and handle.get_marker() == artist.get_marker()
        )
    if getattr(artist, "patches", None) and hasattr(handle, "get_facecolor"):
        return colour(handle.get_facecolor()) == colour(artist.patches[0].get_facecolor())
    return True


def legend_problems(
    fig: matplotlib.figure.Figure, drawn: dict[str, list[object]], banded: bool
) -> list[str]:
    found = []
    legends = fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    keys = [
        text.get_text()
        for legend in legends
        for handle, text in zip(legend.legend_handles, legend.get_texts())
        if handle is not None and handle.get_gid() == KEY
    ]
    if banded and not any("IQR" in key for key in keys):
        found.append("a shaded band the legend does not name")
    tallest = max((ax.bbox.height for ax in fig.axes if ax.get_visible()), default=0.0)
    for legend in legends:
        texts = legend.get_texts()
        if legend.get_window_extent().height > 0.5 * tallest:
            found.append(f"legend over half as tall as a panel ({len(texts)} entries)")
        if len(texts) > 4 and legend._ncols == 1:
            found.append(f"legend of {len(texts)} entries in one column")
        for handle, text in zip(legend.legend_handles, texts):
            if handle is not None and handle.get_gid() == KEY:
                continue
            named = [artist for artist in drawn.get(text.get_text(), []) if has_data(artist)]
            if not named:
                found.append(f"legend entry with nothing drawn: {text.get_text()!r}")
            elif handle is not None and not any(looks_alike(handle, artist) for artist in named):
                found.append(f"legend entry unlike what it names: {text.get_text()!r}")
    entries = {text.get_text() for legend in legends for text in legend.get_texts()}
    found += [
        f"a series drawn with no legend entry: {label!r}"
        for label, artists in drawn.items()
        if not label.startswith("_") and label not in entries and any(has_data(a) for a in artists)
    ]
    return found


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
    banded = False
    for ax in shown_axes(fig):
        for axis in (ax.xaxis, ax.yaxis):
            labels = drawn_ticklabels(axis)
            if overlapping([t.get_window_extent(renderer).shrunk(0.98, 0.9) for t in labels]):
                found.append(f"tick labels overlap: {[t.get_text() for t in labels]}")
        for label in (ax.get_xlabel(), ax.get_ylabel()):
            if RAW_NAME.fullmatch(label):
                found.append(f"axis label is a column name: {label!r}")
        styles = [
            (line.get_color(), line.get_marker(), line.get_linestyle())
            for line in ax.lines
            if not line.get_label().startswith("_")
        ]
        if len(styles) != len(set(styles)):
            found.append(
                f"two lines of one style in a panel ({ax.get_title()!r}): one can hide the other"
            )
        found += axis_problems(ax)
        for artist in [*ax.lines, *ax.containers, *ax.collections]:
            drawn.setdefault(str(artist.get_label()), []).append(artist)
        banded = banded or any(
            isinstance(c, matplotlib.collections.FillBetweenPolyCollection) for c in ax.collections
        )
    return (
        found
        + scale_problems([ax for ax in fig.axes if ax.get_visible()])
        + legend_problems(fig, drawn, banded)
    )


@pytest.mark.parametrize("runs", list(RUNS), ids=list(RUNS))
def test_every_plot_of_a_report_reads_cleanly(runs, tmp_path, monkeypatch):
    seen: dict[str, list[str]] = {}
    save = matplotlib.figure.Figure.savefig

    # the PNG's name is a temporary's: the figure's titles name it
    def checked_save(fig, target, *args, **kwargs):
        titles = [
            t.get_text()
            for t in (fig._suptitle, *(ax.title for ax in fig.axes))
            if t is not None and t.get_text()
        ]
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
    # b under a, drawn alike
    ax.plot(range(40), range(40), color="C0", marker="o", label="b")
    ax.plot([], [], label="ghost")
    ax.set_xticks(range(0, 40, 2), [f"{10000 * i}" for i in range(0, 40, 2)])
    ax.set_ylabel("busbw_gbps")
    fig.text(0.99, 0.5, "a note that runs off the page")
    fig.legend()
    kinds = {f.split(":")[0].split(" (")[0] for f in problems(fig)}
    plt.close(fig)
    assert kinds == {
        "text outside the figure",
        "tick labels overlap",
        "axis label is a column name",
        "two lines of one style in a panel",
        "legend entry with nothing drawn",
    }


def test_the_checks_catch_the_misreadings_a_user_found():
    import matplotlib.pyplot as plt

    fig, (left, right, cats) = plt.subplots(1, 3, figsize=(9, 2.5))
    # one quantity, each panel its own scale
    for ax, top in ((left, 0.07), (right, 0.17)):
        ax.plot([1024], [top], marker="o", color="C0", label="fp32 machine")
        ax.set_ylabel("TFLOP/s")
    left.set_yscale("log")
    # a log axis holding one number or none
    left.set_ylim(0.06, 0.08)
    left.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    # the point sits on the frame: half a marker
    right.set_ylim(0.1, 0.17)
    # a band nobody names
    right.fill_between([1000, 1100], [0.12, 0.12], [0.14, 0.14], alpha=0.2)
    # two categories, one line, no entry
    cats.plot([0, 1], [1e6, 2e6], marker="s", color="C1", label="joined")
    cats.set_xticks([0, 1], ["bf16", "fp32"])
    cats.set_ylabel("peak memory (bytes)")
    cats.set_yticks([1e6, 2e6], ["1M", "2M"])
    bars = cats.bar([0, 1], [1e6, 1.5e6], color="C2", label="bars")
    handles = [plt.Line2D([], [], color="C3", marker="o", label="fp32 machine"), bars]
    fig.legend(
        handles + [plt.Line2D([], [], label=f"entry {i}") for i in range(6)],
        ["fp32 machine", "bars", *(f"entry {i}" for i in range(6))],
        ncol=1,
    )
    kinds = {f.split(":")[0].split(" (")[0].split(" on ")[0] for f in problems(fig)}
    plt.close(fig)
    assert {
        "log axis with fewer than two numbers",
        "marker cut by the frame",
        "categories joined by a line",
        "bytes not in binary units",
        "panels of 'TFLOP/s'",
        "a shaded band the legend does not name",
        "legend over half as tall as a panel",
        "legend of 8 entries in one column",
        "legend entry unlike what it names",
        "a series drawn with no legend entry",
    } <= kinds


Saved = tuple[matplotlib.figure.Figure, list[str]]


@pytest.fixture
def figures(monkeypatch) -> list[Saved]:
    """Each figure the plot functions save, with its `problems` read as saved (laid out, before it
    is closed)."""
    saved: list[Saved] = []
    save = matplotlib.figure.Figure.savefig

    def keep(fig, *args, **kwargs):
        saved.append((fig, problems(fig)))
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep)
    return saved


def cases(workload: str, points: list[dict[str, object]], **common: object) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"workload": workload, "machine": "m", "device_name": "AMD EPYC", **common, **point}
            for point in points
        ]
    )


def point_height_px(ax) -> float:
    line = next(line for line in ax.lines if len(line.get_xdata()))
    return float(ax.transData.transform(line.get_xydata())[0, 1])


def test_panels_of_one_quantity_share_one_scale(tmp_path, figures):
    """bf16's 0.17 TFLOP/s is drawn above fp32's 0.07, not level with it on a scale of its own."""
    rows = cases(
        "matmul", [{"dtype": "fp32", "tflops": 0.07}, {"dtype": "bf16", "tflops": 0.17}], size=1024
    )
    plots.matmul_plot(rows, tmp_path)
    ((fig, found),) = figures
    fp32, bf16 = [ax for ax in fig.axes if ax.get_visible()]
    assert fp32.get_ylim() == bf16.get_ylim() and point_height_px(bf16) > point_height_px(fp32)
    assert found == []


def test_every_log_axis_shows_two_numbers(tmp_path, figures):
    """One matmul size, transfers of one size, values within a decade: no log axis reduced to one
    tick ("10")."""
    plots.matmul_plot(
        cases(
            "matmul",
            [{"dtype": "fp32", "tflops": 7.0}, {"dtype": "fp16", "tflops": 14.0}],
            size=1024,
        ),
        tmp_path,
    )
    plots.bandwidth_plot(
        cases(
            "transfer",
            [{"direction": d, "gbps": g} for d, g in (("h2d", 9.0), ("d2h", 12.0))],
            size=2**25,
            pinned=True,
            non_blocking=False,
        ),
        "transfer",
        tmp_path,
    )
    spec = PlotSpec(x="seq_len", y="tflops", hue="causal", logx=True, logy=True)
    plots.spec_plot(
        cases(
            "attention",
            [
                {"seq_len": s, "causal": c, "tflops": t}
                for s, c, t in ((256, True, 8.0), (512, True, 9.5), (256, False, 11.0))
            ],
        ),
        spec,
        tmp_path / "attention.png",
    )
    assert [found for _, found in figures] == [[], [], []]


def test_categories_are_points_never_a_line(tmp_path, figures):
    spec = PlotSpec(x="dtype", y="tflops", hue="channels_last")
    rows = cases(
        "conv2d",
        [
            {"dtype": d, "channels_last": c, "tflops": t}
            for d, c, t in (
                ("bf16", True, 70.0),
                ("fp16", True, 90.0),
                ("fp32", True, 20.0),
                ("bf16", False, 40.0),
                ("fp16", False, 45.0),
            )
        ],
    )
    plots.spec_plot(rows, spec, tmp_path / "conv2d.png")
    ((fig, found),) = figures
    (ax,) = fig.axes
    assert categorical(ax.xaxis) and len(ax.lines) == 2 and found == []


def test_a_legend_names_the_bands_and_stays_below_the_panels(tmp_path, figures):
    """Seven lines with their builds' IQR: the legend names the shading and takes columns, not the
    page."""
    spec = PlotSpec(x="batch_size", y="samples_per_s", hue="precision")
    rows = cases(
        "model",
        [
            {
                "batch_size": b,
                "precision": f"setting-{p}",
                "samples_per_s": 100.0 * (p + 1) * b,
                "samples_per_s_q1": 90.0 * (p + 1) * b,
                "samples_per_s_q3": 110.0 * (p + 1) * b,
            }
            for p in range(7)
            for b in (8, 32)
        ],
    )
    plots.spec_plot(rows, spec, tmp_path / "model.png")
    ((fig, found),) = figures
    (legend,) = fig.legends
    assert IQR_LABEL in [text.get_text() for text in legend.get_texts()] and legend._ncols >= 2
    assert found == []


def test_bytes_are_written_in_binary_units(tmp_path, figures):
    """32 MiB on the axis, as in the table, never 33.6M: a memory ladder, its bars, and collectives
    of one size."""
    rows = cases(
        "memory",
        [
            {"batch_size": b, "step": "train", "setting": f"bs{b}", "peak_mem_bytes": b * 2**20}
            for b in (24, 32, 40)
        ],
    )
    plots.spec_plot(
        rows, PlotSpec(x="batch_size", y="peak_mem_bytes", hue="step"), tmp_path / "memory.png"
    )
    bar_plots.spec_bars(
        rows, PlotSpec(x="setting", y="peak_mem_bytes", bars=True), tmp_path / "bars.png"
    )
    one_size = cases(
        "collectives",
        [
            {"size": float(2**25), "op": op, "busbw_gbps": g}
            for op, g in (("all_reduce", 90.0), ("broadcast", 120.0))
        ],
    )
    plots.spec_plot(
        one_size,
        PlotSpec(x="size", y="busbw_gbps", hue="op", logx=True, logy=True),
        tmp_path / "collectives.png",
    )
    (line_fig, line_found), (bar_fig, bar_found), (size_fig, size_found) = figures
    labels = [
        t.get_text()
        for t in drawn_ticklabels(line_fig.axes[0].yaxis) + drawn_ticklabels(bar_fig.axes[0].xaxis)
    ]
    assert labels and all(BINARY_BYTES.fullmatch(text) for text in labels) and "32 MiB" in labels
    assert [t.get_text() for t in drawn_ticklabels(size_fig.axes[0].xaxis)] == ["32 MiB"]
    assert line_found == [] and bar_found == [] and size_found == []


def history_runs(values: list[float], minutes_apart: float) -> pd.DataFrame:
    """Runs of one CPU machine (no gpubench reference), `minutes_apart`, with these matmul fp32
    TFLOP/s."""
    start = pd.Timestamp("2026-12-04T15:00:00Z")
    return pd.DataFrame(
        [
            {
                "machine": "vm · AMD EPYC (cpu)",
                "hostname": "vm",
                "machine_id": "m",
                "device": "cpu",
                "device_name": "AMD EPYC",
                "run_id": f"r{i}",
                "torch": "2.11.0",
                "started": start + pd.Timedelta(minutes=minutes_apart * i),
                "matmul_fp32_tflops": value,
            }
            for i, value in enumerate(values)
        ]
    )


def test_history_shows_a_relative_change_over_the_runs_own_span(tmp_path, figures):
    """−1% between runs a minute apart reads as −1% on a ±5% window, over the minute and a tenth
    either side."""
    history.plot_history(history_runs([0.002730, 0.0027027], minutes_apart=1.0), tmp_path)
    ((fig, found),) = figures
    (ax,) = [ax for ax in fig.axes if ax.get_visible()]
    # the first and last runs' markers whole, not cut by the frame
    assert found == []
    low, high = ax.get_ylim()
    assert high - low >= 0.1 * 0.0027
    # matplotlib dates: days
    left, right = ax.get_xlim()
    assert 1.0 < (right - left) * 24 * 60 <= 1.5
    # the same axis as % of the first run, on the right
    (change,) = ax.child_axes
    changes = {t.get_text().replace("−", "-") for t in drawn_ticklabels(change.yaxis)}
    assert {"-4%", "+0%", "+4%"} <= changes


def test_a_line_stops_where_sizes_were_never_measured(tmp_path, figures):
    """Elementwise measured at 2^20 and 2^25 elements: two points each, no line across the 32x
    between them (two machines' lines crossing there would be a crossover nobody measured)."""
    rows = cases(
        "elementwise",
        [
            {"machine": m, "size": size, "gbps": g, "memory_tier": "dram"}
            for m, sizes in (("a", (180.0, 30.0)), ("b", (90.0, 45.0)))
            for size, g in zip((2**20, 2**25), sizes)
        ],
        op="add",
        dtype="fp32",
    )
    plots.bandwidth_plot(rows, "elementwise", tmp_path)
    ((fig, found),) = figures
    assert found == []
    lines = [line for ax in fig.axes for line in ax.lines if line.get_label() in ("a", "b")]
    assert len(lines) == 2 and all(
        np.isnan(np.asarray(line.get_xdata(), dtype=float)).any() for line in lines
    )
    joined = plots.plt.figure()
    joined.add_subplot(xscale="log").plot([2**20, 2**25], [1.0, 2.0], label="joined")
    # the check sees such a line
    assert any("never measured" in f for f in axis_problems(joined.axes[0]))
    plots.plt.close(joined)


def test_busy_points_are_crossed_and_the_legend_says_so(tmp_path, figures):
    rows = cases(
        "matmul",
        [
            {"size": 512, "tflops": 0.1, "flags": ""},
            {"size": 1024, "tflops": 0.05, "flags": "busy"},
        ],
        dtype="fp32",
    )
    plots.matmul_plot(rows, tmp_path)
    ((fig, found),) = figures
    assert found == []
    crosses = [line for ax in fig.axes for line in ax.lines if line.get_marker() == "x"]
    assert [list(line.get_xydata()[0]) for line in crosses] == [[1024.0, 0.05]]
    assert BUSY_LABEL in [t.get_text() for legend in fig.legends for t in legend.get_texts()]


def test_memory_strategies_are_set_per_sample_where_batch_sizes_differ(tmp_path, figures):
    """smaller_batch's 28.4 ms step is of 64 samples, the baseline's 90.6 ms of 256: per sample it
    is the slower."""
    rows = cases(
        "memory_strategies",
        [
            {
                "strategy": "baseline",
                "effective_batch": 256,
                "step_s": 0.0906,
                "peak_mem_bytes": 82.8 * 2**20,
            },
            {
                "strategy": "smaller_batch",
                "effective_batch": 64,
                "step_s": 0.0284,
                "peak_mem_bytes": 23.1 * 2**20,
            },
        ],
        mem_source="cpu-profiler",
    )
    bar_plots.memory_plot(rows, tmp_path)
    ((fig, found),) = figures
    assert found == []
    time_ax = fig.axes[0]
    assert time_ax.get_xlabel().startswith("optimizer step per sample (µs)")
    widths = {
        label.get_text(): patch.get_width()
        for label, patch in zip(time_ax.get_yticklabels(), time_ax.patches)
    }
    assert widths == pytest.approx({"baseline": 90.6e3 / 256, "smaller_batch": 28.4e3 / 64})


def test_the_epoch_plot_draws_the_spread_the_tables_print(tmp_path, figures):
    rows = cases(
        "mnist_epoch",
        [
            {
                "setting": "guide-template",
                "samples_per_s": 2000.0,
                "builds": 3,
                "samples_per_s_q1": 1800.0,
                "samples_per_s_q3": 2100.0,
                "rel_iqr": 0.5,
            },
            {"setting": "preloaded", "samples_per_s": 6000.0, "builds": 1, "rel_iqr": 0.2},
        ],
        input_bound=False,
    )
    bar_plots.epoch_plot(rows, tmp_path)
    ((fig, found),) = figures
    assert found == []
    (bars,) = [
        c for c in fig.axes[0].containers if isinstance(c, matplotlib.container.BarContainer)
    ]
    segments = [seg for collection in bars.errorbar.lines[2] for seg in collection.get_segments()]
    spans = sorted((round(seg[0][0]), round(seg[1][0])) for seg in segments)
    assert spans == [(1800, 2100), (round(6000 / 1.1), round(6000 / 0.9))]
    assert bar_plots.EPOCH_BARS in [
        t.get_text() for legend in fig.legends for t in legend.get_texts()
    ]
