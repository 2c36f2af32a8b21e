"""Ladder plots (a figure over a size, a line per machine or setting) of the aggregated cases, each
one PNG or None. Readable at twenty machines: small multiples on one shared scale, log axes only
where values span decades, every line its own colour, hollow marker and dash (a line under another
still shows), categories as points never joined."""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from pathlib import Path

from gpubench.reports.render.drawing import matplotlib, plt

import matplotlib.container  # noqa: E402
import matplotlib.lines  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from gpubench.harness.core.peaks import peak_gbps, peak_tflops  # noqa: E402
from gpubench.harness.records.safe_files import replacing  # noqa: E402
from gpubench.harness.core.workload_spec import PlotSpec  # noqa: E402
from gpubench.harness.records.schema import BY_NAME, SETTING_COLUMNS  # noqa: E402
from gpubench.reports.judge.text import MAX_LABEL_CHARS, replace_texts, short_label  # noqa: E402
from gpubench.reports.render.plot_marks import (  # noqa: E402
    broken_at_gaps,
    busy_key,
    mark_busy,
    plotted_rows,
)
from gpubench.reports.render.units import human  # noqa: E402

MAX_LEGEND = 24
# entries in one column; more take columns
MAX_LEGEND_ROWS = 4
# laid out at the resolution it is saved at: tight_layout's text sizes are then savefig's
DPI = 110
# a machine label at its longest (gpubench.reports.judge.load.base_labels)
MAX_PLOT_LABEL = 3 * MAX_LABEL_CHARS + 6


def literal(text: str) -> str:
    """A label from the files drawn as text: '$' escaped (a pair would be typeset as a formula, or
    stop the plot), at most MAX_PLOT_LABEL characters (a 10,000-character model name would fill the
    legend)."""
    return short_label(text, MAX_PLOT_LABEL).replace("$", "\\$")


def _literal_dollars(frame: pd.DataFrame) -> pd.DataFrame:
    """Text cells made `literal`."""
    return replace_texts(frame, lambda text: "$" in text or len(text) > MAX_PLOT_LABEL, literal)


def literal_labels(plot):
    """A plot's rows reach it with their labels made literal: the one place plots take untrusted
    text."""

    @functools.wraps(plot)
    def draw(rows: pd.DataFrame, *args, **kwargs):
        return plot(_literal_dollars(rows), *args, **kwargs)

    return draw


def _save(fig: plt.Figure, path: Path, dpi: int = DPI, tight: bool = True) -> Path:
    """`tight`: laid out to fit its text; a figure laid out once by hand (fixed margins) is saved as
    it is."""
    if tight:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            # room for a figure legend below
            fig.tight_layout(rect=(0, getattr(fig, "legend_space", 0.0), 1, 1))
    # through a temporary in the report's folder: a link planted at the PNG's name is replaced, not
    # followed
    try:
        with (
            replacing(
                path.parent, path.name, "report folder", "pass --out with the folder itself"
            ) as handle,
            warnings.catch_warnings(),
        ):
            # A host name in a script or emoji the font lacks is drawn as a box: two stderr lines
            # per glyph say no more.
            warnings.filterwarnings(
                "ignore", message=r"Glyph \d+ .*missing from", category=UserWarning
            )
            fig.savefig(handle, dpi=dpi, format="png")
    finally:
        plt.close(fig)
    return path


def _panels(
    count: int, width: float = 4.2, height: float = 3.4, columns: int = 4, share: str = ""
) -> tuple[plt.Figure, list[plt.Axes]]:
    """`share` ("y", "xy"): every panel on one scale of those axes, shared y numbers on the first
    column only (a point higher than another is a larger value, whichever panels they are in)."""
    cols = min(columns, max(1, count))
    rows = math.ceil(count / cols)
    fig, axes = plt.subplots(
        rows,
        cols,
        figsize=(width * cols, height * rows + 0.6),
        squeeze=False,
        dpi=DPI,
        sharex="x" in share,
        sharey="y" in share,
    )
    flat = list(axes.flat)
    for extra in flat[count:]:
        extra.set_visible(False)
    # a panel above a hidden one is a bottom panel: every panel keeps its x numbers
    for ax in flat[:count]:
        ax.tick_params(axis="x", labelbottom=True)
        # every panel names its quantity; with a shared y, only the first column (which has the
        # numbers) prints it
        ax.yaxis.label.set_visible("y" not in share or ax.get_subplotspec().is_first_col())
    return fig, flat[:count]


# the gid of a legend entry that explains a pattern (a hatch) rather than naming a drawn series
KEY = "key"
IQR_LABEL = "shaded: IQR over builds"


def drawn(handle: matplotlib.artist.Artist) -> bool:
    """A legend handle stands for something on the page: a line with a finite point, bars with a
    bar."""
    if isinstance(handle, matplotlib.lines.Line2D):
        return bool(np.isfinite(np.asarray(handle.get_xydata(), dtype=float)).all(axis=-1).any())
    return not isinstance(handle, matplotlib.container.Container) or len(handle) > 0


def _legend(
    fig: plt.Figure,
    axes: list[plt.Axes],
    keys: tuple[matplotlib.artist.Artist, ...] = (),
    banded: bool = False,
) -> None:
    """One legend below the panels: each drawn series once, in the order drawn, then the `keys` (gid
    KEY) and, where `banded`, what the shading is (unnamed, a band reads as a second line). Beyond
    MAX_LEGEND_ROWS entries it takes columns, the figure widened for two where one would not fit: a
    legend as tall as its panels is read first."""
    keys = (
        (*keys, Patch(facecolor="grey", alpha=0.3, linewidth=0, label=IQR_LABEL, gid=KEY))
        if banded
        else keys
    )
    entries: dict[str, matplotlib.artist.Artist] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label not in entries and drawn(handle):
                entries[label] = handle
    entries.update({key.get_label(): key for key in keys})
    labels = list(entries)[:MAX_LEGEND]
    if not labels:
        return
    # ~0.075 inch a character at size 8
    column_in = 0.075 * max(len(label) for label in labels) + 0.5
    width_in, height_in = fig.get_size_inches()
    wanted = 1 if len(labels) <= MAX_LEGEND_ROWS else 2
    # the figure widens: no entry is cut, no legend is one long column
    if width_in < wanted * column_in:
        fig.set_size_inches(wanted * column_in, height_in)
    fits = max(1, min(4, int(fig.get_size_inches()[0] / column_in)))
    rows = math.ceil(len(labels) / fits)
    legend = fig.legend(
        [entries[label] for label in labels],
        labels,
        loc="lower center",
        ncol=math.ceil(len(labels) / rows),
        fontsize=8,
        frameon=False,
        bbox_to_anchor=(0.5, 0.0),
    )
    for handle, text in zip(legend.legend_handles, legend.get_texts()):
        if handle is not None and text.get_text() in {key.get_label() for key in keys}:
            # the legend draws a copy of each handle: the mark goes on the copy
            handle.set_gid(KEY)
    # 0.2 inch a legend row
    fig.legend_space = min(0.6, 0.2 * rows / fig.get_size_inches()[1])


def compact(value: float) -> str:
    """A tick number read at a glance: 500, 5k, 1.2M, 0.25 (never 5e+03 beside 500)."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


class _LogNumbers(matplotlib.ticker.LogLocator):
    """Log ticks at 1, 2 and 5 of each decade over up to three decades (labels even under a decade),
    at each decade beyond (eighteen labels over six decades would run together)."""

    def tick_values(self, vmin: float, vmax: float):
        decades = abs(math.log10(max(vmax, 1e-300) / max(vmin, 1e-300)))
        self.set_params(subs=(1.0, 2.0, 5.0) if decades <= 3 else (1.0,))
        return super().tick_values(vmin, vmax)


class _BinaryLocator(matplotlib.ticker.MaxNLocator):
    """Linear byte ticks at round counts of one binary unit (0, 8, 16 MiB), never at 10⁶ bytes (9.54
    MiB)."""

    def tick_values(self, vmin: float, vmax: float):
        scale = 1024.0 ** min(4, int(math.log(max(abs(vmin), abs(vmax), 1.0), 1024)))
        return super().tick_values(vmin / scale, vmax / scale) * scale


def log_worthy(values: pd.Series, ratio: float = 10.0) -> bool:
    """All positive and spanning `ratio` (a decade): under it a log axis holds a tick or two, no
    more than linear."""
    positive = values[values > 0]
    return (
        len(positive) > 1 and bool((values > 0).all()) and positive.max() / positive.min() >= ratio
    )


def _size_number(value: float) -> str:
    """A size as counted: 256, 8192, then 2²⁰ (1048576 would crowd its neighbours)."""
    if value >= 1e5 and math.log2(value).is_integer():
        return f"$2^{{{math.log2(value):.0f}}}$"
    return f"{value:.0f}" if float(value).is_integer() and value < 1e5 else compact(value)


TICK_TEXT = {
    "value": compact,
    "size": _size_number,
    "bytes": lambda value: human(value, "bytes").replace(".0 ", " "),
}


def scale_axis(
    ax: plt.Axes, values: pd.Series, axis: str = "y", kind: str = "value", log: bool = True
) -> None:
    """An axis's scale and numbers (shared axes: every panel's). `kind` "value": log where `log` and
    the values span a decade, numbers at 1, 2 and 5 of each (0.19, 4.2, 5k); "size" and "bytes"
    (binary units as the tables write them: 32 MiB, never 33.6M): log2 where they span two octaves.
    Linear below: a log axis over less holds one tick."""
    target, base = getattr(ax, f"{axis}axis"), 10 if kind == "value" else 2
    if log and log_worthy(values, 10.0 if base == 10 else 4.0):
        getattr(ax, f"set_{axis}scale")("log", base=base)
        target.set_major_locator(
            _LogNumbers(base=10) if base == 10 else matplotlib.ticker.LogLocator(base=2, numticks=8)
        )
        target.set_minor_formatter(matplotlib.ticker.NullFormatter())
    else:
        # sizes double: 8, 16, 24, 32
        steps = [1, 2, 4, 5, 8, 10] if kind != "value" else None
        target.set_major_locator(
            (_BinaryLocator if kind == "bytes" else matplotlib.ticker.MaxNLocator)(5, steps=steps)
        )
    target.set_major_formatter(
        matplotlib.ticker.FuncFormatter(lambda value, _: TICK_TEXT[kind](value))
    )


# seven, coprime with ten colours: 70 lines before a style repeats
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
DASHES = ("-", "--", ":", "-.")


def line_styles(labels: list[str]) -> dict[str, dict[str, object]]:
    """Each line name its own colour, hollow marker and dash, the same in every panel of a
    figure."""
    return {
        label: {
            "color": f"C{i % 10}",
            "marker": MARKERS[i % len(MARKERS)],
            "linestyle": DASHES[i // 70 % len(DASHES)],
            "fillstyle": "none",
        }
        for i, label in enumerate(labels)
    }


# Axis labels in words, with units, for the columns a declared plot may draw.
AXIS_LABELS = {
    "tflops": "TFLOP/s",
    "gbps": "GB/s",
    "busbw_gbps": "bus bandwidth (GB/s)",
    "algbw_gbps": "algorithm bandwidth (GB/s)",
    "samples_per_s": "samples/s",
    "tokens_per_s": "tokens/s",
    "median_s": "time (s)",
    "step_s": "step time (s)",
    "pct_of_measured_peak": "% of this machine's matmul, same dtype",
    "pct_of_peak": "% of datasheet peak",
    "seq_len": "sequence length (tokens)",
    "batch_size": "batch size (samples)",
    "size": "size (bytes)",
    "dtype": "dtype",
    "setting": "setting",
    "peak_mem_bytes": "peak memory (bytes)",
}


def axis_label(column: str) -> str:
    return AXIS_LABELS.get(column, column.replace("_", " "))


def _band(ax: plt.Axes, series: pd.DataFrame, x: str, y: str, color: str) -> bool:
    """The builds' IQR as a band around the median line, where it has a width (several builds ran);
    True if drawn."""
    if f"{y}_q1" in series and (series[f"{y}_q3"] > series[f"{y}_q1"]).any():
        xs, low = broken_at_gaps(series[x], series[f"{y}_q1"])
        ax.fill_between(
            xs,
            low,
            broken_at_gaps(series[x], series[f"{y}_q3"])[1],
            color=color,
            alpha=0.2,
            linewidth=0,
        )
        return True
    return False


def _drawable(rows: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """The rows a log-log panel can draw: x and y above zero (an ok row with an empty setting keeps
    its table row)."""
    return rows[(rows[x] > 0) & (rows[y] > 0)] if {x, y} <= set(rows.columns) else rows.iloc[0:0]


def _ladders(
    rows: pd.DataFrame,
    y: str,
    panels: list[str],
    styles: dict[str, dict[str, object]],
    peak: Callable[[str, str], float | None],
    labels: tuple[str, str, str],
    path: Path,
    x_kind: str = "size",
) -> Path:
    """A panel per value of `panel` on one shared scale, `y` over size, a line per value of `line`
    with its builds' IQR band and, where `peak(device name, panel)` knows it, the peak dashed.
    `labels`: the dashed note, x label, y label."""
    fig, axes = _panels(len(panels), share="xy")
    banded = busy = False
    for ax, panel in zip(axes, panels):
        dashed = False
        for label, line in rows[rows["panel"] == panel].groupby("line"):
            line = line.sort_values("size")
            ax.plot(*broken_at_gaps(line["size"], line[y]), label=label, **styles[label])
            banded = _band(ax, line, "size", y, str(styles[label]["color"])) or banded
            busy = mark_busy(ax, line, "size", y) or busy
            value = peak(str(line["device_name"].iloc[0]), panel)
            if value:
                ax.axhline(value, color=str(styles[label]["color"]), linestyle="--", linewidth=0.8)
                dashed = True
        ax.set_title(str(panel) + (f" (dashed: {labels[0]})" if dashed else ""), fontsize=9)
        ax.set_xlabel(labels[1])
        ax.set_ylabel(labels[2])
        ax.grid(True, which="both", alpha=0.3)
    # shared: the scale and ticks of one panel are every panel's
    scale_axis(axes[0], rows["size"], "x", x_kind)
    scale_axis(axes[0], rows[y])
    _legend(fig, axes, (busy_key(KEY),) if busy else (), banded=banded)
    return _save(fig, path)


@literal_labels
def matmul_plot(cases: pd.DataFrame, out: Path) -> Path | None:
    """One panel per dtype: TFLOP/s over n per machine, the datasheet peak dashed."""
    rows = _drawable(cases[cases["workload"] == "matmul"], "size", "tflops")
    dtypes = (
        [d for d in ("fp32", "tf32", "fp16", "bf16") if d in set(rows["dtype"])]
        if not rows.empty
        else []
    )
    # rows of a dtype this plot does not know (a hand-made or foreign file): no panel to draw
    if not dtypes:
        return None
    styles = {
        m: dict(style, linestyle="-")
        for m, style in line_styles(sorted(rows["machine"].unique())).items()
    }
    return _ladders(
        rows.assign(panel=rows["dtype"], line=rows["machine"]),
        "tflops",
        dtypes,
        styles,
        peak_tflops,
        ("datasheet peak", "n (square matmul)", "TFLOP/s"),
        out / "matmul_tflops.png",
    )


def _transfer_label(row: pd.Series) -> str:
    return (
        f"{'pinned' if row['pinned'] else 'pageable'}, "
        f"{'non_blocking' if row['non_blocking'] else 'blocking'}"
    )


@literal_labels
def bandwidth_plot(cases: pd.DataFrame, workload: str, out: Path) -> Path | None:
    """Transfers: a panel per direction, a line per machine and memory kind (pinned or pageable,
    blocking or not). Elementwise: a panel per op and dtype, a line per machine, the memory
    datasheet peak dashed."""
    rows = _drawable(cases[cases["workload"] == workload], "size", "gbps")
    if rows.empty:
        return None
    transfer = workload == "transfer"
    if transfer:
        rows = rows.assign(
            panel=rows["direction"].astype(str),
            line=rows["machine"] + " · " + rows.apply(_transfer_label, axis=1),
        )
    else:
        rows = rows.assign(
            panel=rows["op"].astype(str) + " · " + rows["dtype"].astype(str), line=rows["machine"]
        )
    return _ladders(
        rows,
        "gbps",
        sorted(rows["panel"].unique()),
        line_styles(sorted(rows["line"].unique())),
        lambda device, _: None if transfer else peak_gbps(device),
        ("memory peak", "bytes per transfer" if transfer else "elements per tensor", "GB/s"),
        out / f"{workload}_gbps.png",
        "bytes" if transfer else "size",
    )


def _hue_labels(rows: pd.DataFrame, hues: tuple[str, ...]) -> pd.Series:
    """Each row's line name: `col=value` for every hue column the row has a value in, joined (one
    name for no hue)."""
    if not hues:
        return pd.Series("", index=rows.index)
    named = rows[list(hues)].astype(object).where(rows[list(hues)].notna(), None)
    return named.apply(
        lambda values: ", ".join(f"{c}={v}" for c, v in zip(hues, values) if v is not None), axis=1
    )


def _spec_panels(rows: pd.DataFrame, panels: tuple[str, ...]) -> list[tuple[str, pd.DataFrame]]:
    """(title, rows) per machine and, where declared, per value of the panel columns."""
    keys = ["machine", *panels]
    out = []
    for values, group in rows.groupby(keys, sort=True):
        values = values if isinstance(values, tuple) else (values,)
        title = str(values[0]) + "".join(f" · {c}={v}" for c, v in zip(panels, values[1:]))
        out.append((title, group))
    return out


def told_apart(rows: pd.DataFrame, spec: PlotSpec) -> tuple[str, ...]:
    """The declared hue columns, then every other setting that still varies among the rows of one
    panel, line and x: without it two settings would share a line (a vertical segment at one x)."""
    hues = list(spec.hues)
    keys = ["machine", *spec.panels, spec.x]
    for column in [c for c in SETTING_COLUMNS if c in rows and c not in {*keys, *hues}]:
        if rows.groupby(keys + hues, dropna=False)[column].nunique(dropna=False).max() > 1:
            hues.append(column)
    return tuple(hues)


def _categorical(group: pd.DataFrame, x: str) -> bool:
    """Categories (dtypes, settings) and a panel's single x are points side by side, never a joined
    line."""
    return group[x].nunique() <= 1 or not pd.api.types.is_numeric_dtype(group[x])


def _spec_panel(
    ax: plt.Axes, group: pd.DataFrame, spec: PlotSpec, styles: dict[str, dict[str, object]]
) -> tuple[bool, bool]:
    """One panel's lines (a numeric ladder) or dodged points (categories); whether a band, a busy
    cross was drawn."""
    lines = sorted(group["_line"].unique())
    categories = sorted(group[spec.x].unique()) if _categorical(group, spec.x) else []
    banded = busy = False
    for index, (label, line) in enumerate(group.groupby("_line", sort=True)):
        line = line.sort_values(spec.x)
        style = styles[label]
        # a point per category, shifted per line: equal values stay visible side by side
        if categories:
            shift = (index - (len(lines) - 1) / 2) * 0.6 / max(len(lines), 1)
            xs = line[spec.x].map(categories.index) + shift
            ax.plot(xs, line[spec.y], label=label or None, **dict(style, linestyle="none"))
            busy = mark_busy(ax, line.assign(_x=xs), "_x", spec.y) or busy
        else:
            ax.plot(*broken_at_gaps(line[spec.x], line[spec.y]), label=label or None, **style)
            banded = _band(ax, line, spec.x, spec.y, str(style["color"])) or banded
            busy = mark_busy(ax, line, spec.x, spec.y) or busy
    if categories:
        # one size: 32 MiB or 16384, never 33.6M
        named = TICK_TEXT["bytes" if bytes_column(spec.x) else "size"]
        ax.set_xticks(
            range(len(categories)),
            [
                named(float(c))
                if pd.api.types.is_float(c) or pd.api.types.is_integer(c)
                else str(c)
                for c in categories
            ],
        )
        ax.set_xlim(-0.5, len(categories) - 0.5)
    return banded, busy


# "size": a declared plot's size is a message's bytes (collectives)
def bytes_column(column: str) -> bool:
    return column == "size" or getattr(BY_NAME.get(column), "unit", "") == "bytes"


def _spec_scales(
    ladders: list[plt.Axes], panel: plt.Axes, rows: pd.DataFrame, spec: PlotSpec
) -> None:
    """The shared scales: x of the ladder panels (categories keep their own ticks), y of every
    panel."""
    if ladders:
        kind = "bytes" if bytes_column(spec.x) else "size"
        scale_axis(ladders[0], rows[spec.x], "x", kind, log=spec.logx or kind == "bytes")
    scale_axis(
        panel, rows[spec.y], "y", "bytes" if bytes_column(spec.y) else "value", log=spec.logy
    )


@literal_labels
def spec_plot(rows: pd.DataFrame, spec: PlotSpec, path: Path) -> Path | None:
    """A workload's declared plot: one panel per machine (and per value of `spec.panels`), `spec.y`
    over `spec.x` on one y scale, a line per value of the hue columns and of any other setting that
    varies (`told_apart`), one style per line name in every panel. Categories are points, dodged so
    none hides another."""
    rows = plotted_rows(rows, spec)
    if rows.empty:
        return None
    rows = rows.assign(_line=_hue_labels(rows, told_apart(rows, spec)))
    styles = line_styles(sorted(rows["_line"].unique()))
    panels = _spec_panels(rows, spec.panels)
    fig, axes = _panels(len(panels), width=5.0, height=3.6, columns=2, share="y")
    ladders: list[plt.Axes] = []
    banded = busy = False
    for ax, (title, group) in zip(axes, panels):
        # ladders share one x scale before anything is drawn on them
        if not _categorical(group, spec.x):
            if ladders:
                ax.sharex(ladders[0])
            ladders.append(ax)
        drew_band, drew_busy = _spec_panel(ax, group, spec, styles)
        banded, busy = banded or drew_band, busy or drew_busy
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(axis_label(spec.x))
        ax.set_ylabel(axis_label(spec.y))
        ax.grid(True, which="both", alpha=0.3)
    _spec_scales(ladders, axes[0], rows, spec)
    _legend(fig, axes, (busy_key(KEY),) if busy else (), banded=banded)
    return _save(fig, path)
