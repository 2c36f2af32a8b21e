"""Ladder plots (a figure over a size, a line per machine or setting) of the aggregated cases, each one PNG or None.
Readable at twenty machines: small multiples, log axes where values span decades, every line its own colour, hollow
marker and dash (a line under another still shows), categories as points never joined by a line."""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import pandas as pd  # noqa: E402

from gpubench.harness.core.peaks import peak_gbps, peak_tflops  # noqa: E402
from gpubench.harness.records.safe_files import replacing  # noqa: E402
from gpubench.harness.core.workload_spec import PlotSpec  # noqa: E402
from gpubench.harness.records.schema import SETTING_COLUMNS  # noqa: E402
from gpubench.reports.markdown import MAX_LABEL_CHARS, short_label  # noqa: E402
from gpubench.reports.units import human  # noqa: E402

MAX_LEGEND = 24
DPI = 110  # laid out at the resolution it is saved at: tight_layout's text sizes are then savefig's
MAX_PLOT_LABEL = 3 * MAX_LABEL_CHARS + 6  # a machine label at its longest (gpubench.reports.load.base_labels)


def literal(text: str, max_chars: int = MAX_PLOT_LABEL) -> str:
    """A label from the files drawn as text: '$' escaped (a pair would be typeset as a formula, or stop the plot), at
    most `max_chars` characters (a 10,000-character model name would fill the legend)."""
    return short_label(text, max_chars).replace("$", "\\$")


def _literal_dollars(frame: pd.DataFrame) -> pd.DataFrame:
    """Text cells made `literal`, each distinct text once."""
    escaped = {}
    for column in [c for c in frame.columns if pd.api.types.is_string_dtype(frame[c].dtype)]:  # object or str
        dirty = {v: literal(v) for v in frame[column].dropna().unique()
                 if isinstance(v, str) and ("$" in v or len(v) > MAX_PLOT_LABEL)}
        if dirty:  # a lookup per cell: DataFrame.replace with a dict compares every cell with every key
            values = frame[column]
            escaped[column] = values.map(dirty).where(values.isin(dirty.keys()), values)
    return frame.assign(**escaped) if escaped else frame


def literal_labels(plot):
    """A plot's rows reach it with their labels made literal: the one place plots take untrusted text."""
    @functools.wraps(plot)
    def draw(rows: pd.DataFrame, *args, **kwargs):
        return plot(_literal_dollars(rows), *args, **kwargs)
    return draw


def _save(fig: plt.Figure, path: Path, dpi: int = DPI, tight: bool = True) -> Path:
    """`tight`: laid out to fit its text; a figure laid out once by hand (fixed margins) is saved as it is."""
    if tight:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            fig.tight_layout(rect=(0, getattr(fig, "legend_space", 0.0), 1, 1))  # room for a figure legend below
    try:  # through a temporary in the report's folder: a link planted at the PNG's name is replaced, not followed
        with replacing(path.parent, path.name, "report folder", "pass --out with the folder itself") as handle, \
                warnings.catch_warnings():
            # A host name in a script or emoji the font lacks is drawn as a box: two stderr lines per glyph say no more.
            warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from", category=UserWarning)
            fig.savefig(handle, dpi=dpi, format="png")
    finally:
        plt.close(fig)
    return path


def _panels(count: int, width: float = 4.2, height: float = 3.4, columns: int = 4) -> tuple[plt.Figure, list[plt.Axes]]:
    cols = min(columns, max(1, count))
    rows = math.ceil(count / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows + 0.6), squeeze=False, dpi=DPI)
    flat = list(axes.flat)
    for extra in flat[count:]:
        extra.set_visible(False)
    return fig, flat[:count]


KEY = "key"  # the gid of a legend entry that explains a pattern (a hatch) rather than naming a drawn series


def _legend(fig: plt.Figure, axes: list[plt.Axes], keys: tuple[matplotlib.artist.Artist, ...] = ()) -> None:
    """One legend below the panels: each series once, in the order drawn, then the `keys` (gid KEY)."""
    handles, labels = {key.get_label(): key for key in keys}, [key.get_label() for key in keys]
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label not in handles:
                handles[label] = handle
                labels.insert(len(labels) - len(keys), label)
    if labels:
        longest = max(len(label) for label in labels[:MAX_LEGEND])
        width_in, height_in = fig.get_size_inches()
        if width_in < 0.075 * longest + 0.5:  # a legend wider than the panels: the figure widens, no entry is cut
            fig.set_size_inches(0.075 * longest + 0.5, height_in)
        # ~0.075 inch a character at size 8
        ncol = max(1, min(3, len(labels), int(fig.get_size_inches()[0] / (0.075 * longest + 0.5))))
        rows = math.ceil(min(len(labels), MAX_LEGEND) / ncol)
        legend = fig.legend([handles[label] for label in labels[:MAX_LEGEND]], labels[:MAX_LEGEND], loc="lower center",
                            ncol=ncol, fontsize=8, frameon=False, bbox_to_anchor=(0.5, 0.0))
        for handle, text in zip(legend.legend_handles, legend.get_texts()):
            if handle is not None and text.get_text() in {key.get_label() for key in keys}:
                handle.set_gid(KEY)  # the legend draws a copy of each handle: the mark goes on the copy
        fig.legend_space = min(0.6, 0.2 * rows / fig.get_size_inches()[1])  # 0.2 inch a legend row


def compact(value: float) -> str:
    """A tick number read at a glance: 500, 5k, 1.2M, 0.25 (never 5e+03 beside 500)."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def _plain_numbers(ax: plt.Axes, axis: str = "y") -> None:
    """Log axes with compact tick labels (0.19, 4.2, 780, 5k), not 1.9×10⁻¹, and labels even when the
    data span less than a decade (ticks at 1, 2 and 5 of each decade)."""
    target = getattr(ax, f"{axis}axis")
    target.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    target.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda value, _: compact(value)))
    target.set_minor_formatter(matplotlib.ticker.NullFormatter())


def linear_numbers(ax: plt.Axes, axis: str = "x") -> None:
    """A linear axis with at most five compact tick labels (10k, 20k, 30k: never run together)."""
    target = getattr(ax, f"{axis}axis")
    target.set_major_locator(matplotlib.ticker.MaxNLocator(5))
    target.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda value, _: compact(value)))


def byte_sizes(ax: plt.Axes) -> None:
    """A log2 x axis of byte sizes labelled 1 KiB, 1 MiB, at most eight ticks."""
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=2, numticks=8))
    ax.xaxis.set_major_formatter(
        matplotlib.ticker.FuncFormatter(lambda value, _: human(value, "bytes").replace(".0 ", " ")))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())


MARKERS = ("o", "s", "^", "D", "v", "P", "X")  # seven, coprime with ten colours: 70 lines before a style repeats
DASHES = ("-", "--", ":", "-.")


def line_styles(labels: list[str]) -> dict[str, dict[str, object]]:
    """Each line name its own colour, hollow marker and dash, the same in every panel of a figure."""
    return {label: {"color": f"C{i % 10}", "marker": MARKERS[i % len(MARKERS)],
                    "linestyle": DASHES[i // 70 % len(DASHES)], "fillstyle": "none"} for i, label in enumerate(labels)}


# Axis labels in words, with units, for the columns a declared plot may draw.
AXIS_LABELS = {
    "tflops": "TFLOP/s", "gbps": "GB/s", "busbw_gbps": "bus bandwidth (GB/s)",
    "algbw_gbps": "algorithm bandwidth (GB/s)",
    "samples_per_s": "samples/s", "tokens_per_s": "tokens/s", "median_s": "time (s)", "step_s": "step time (s)",
    "pct_of_measured_peak": "% of this machine's measured matmul", "pct_of_peak": "% of datasheet peak",
    "seq_len": "sequence length (tokens)", "batch_size": "batch size (samples)", "size": "size (bytes)",
    "dtype": "dtype", "setting": "setting", "peak_mem_bytes": "peak memory (bytes)",
}


def axis_label(column: str) -> str:
    return AXIS_LABELS.get(column, column.replace("_", " "))


def _band(ax: plt.Axes, series: pd.DataFrame, x: str, y: str, color: str) -> None:
    """The builds' interquartile range as a band around the median line (where several builds ran)."""
    if f"{y}_q1" in series and series[f"{y}_q1"].notna().any():
        ax.fill_between(series[x], series[f"{y}_q1"], series[f"{y}_q3"], color=color, alpha=0.2, linewidth=0)


def _drawable(rows: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """The rows a log-log panel can draw: x and y present and above zero (an ok row with an empty
    setting still has its table row; a panel of nothing would stop the report)."""
    return rows[(rows[x] > 0) & (rows[y] > 0)] if {x, y} <= set(rows.columns) else rows.iloc[0:0]


def _log2_x(ax: plt.Axes) -> None:
    ax.set_xscale("log", base=2)


def _ladders(rows: pd.DataFrame, y: str, panels: list[str], styles: dict[str, dict[str, object]],
             peak: Callable[[str, str], float | None], labels: tuple[str, str, str], path: Path,
             x_scale: Callable[[plt.Axes], None] = _log2_x) -> Path:
    """A log panel per value of `panel`, `y` over size, a line per value of `line` with its builds' IQR band and,
    where `peak(device name, panel)` knows it, the peak dashed. `labels`: the dashed note, x label, y label."""
    fig, axes = _panels(len(panels))
    for ax, panel in zip(axes, panels):
        dashed = False
        for label, line in rows[rows["panel"] == panel].groupby("line"):
            line = line.sort_values("size")
            ax.plot(line["size"], line[y], label=label, **styles[label])
            _band(ax, line, "size", y, str(styles[label]["color"]))
            value = peak(str(line["device_name"].iloc[0]), panel)
            if value:
                ax.axhline(value, color=str(styles[label]["color"]), linestyle="--", linewidth=0.8)
                dashed = True
        x_scale(ax)
        ax.set_yscale("log")
        _plain_numbers(ax)
        ax.set_title(str(panel) + (f" (dashed: {labels[0]})" if dashed else ""), fontsize=9)
        ax.set_xlabel(labels[1])
        ax.set_ylabel(labels[2])
        ax.grid(True, which="both", alpha=0.3)
    _legend(fig, axes)
    return _save(fig, path)


@literal_labels
def matmul_plot(cases: pd.DataFrame, out: Path) -> Path | None:
    """One panel per dtype: TFLOP/s over n per machine, the datasheet peak dashed."""
    rows = _drawable(cases[cases["workload"] == "matmul"], "size", "tflops")
    dtypes = [d for d in ("fp32", "tf32", "fp16", "bf16") if d in set(rows["dtype"])] if not rows.empty else []
    if not dtypes:  # rows of a dtype this plot does not know (a hand-made or foreign file): no panel to draw
        return None
    styles = {m: dict(style, linestyle="-") for m, style in line_styles(sorted(rows["machine"].unique())).items()}
    return _ladders(rows.assign(panel=rows["dtype"], line=rows["machine"]), "tflops", dtypes, styles, peak_tflops,
                    ("datasheet peak", "n (square matmul)", "TFLOP/s"), out / "matmul_tflops.png")


def _transfer_label(row: pd.Series) -> str:
    return f"{'pinned' if row['pinned'] else 'pageable'}, {'non_blocking' if row['non_blocking'] else 'blocking'}"


@literal_labels
def bandwidth_plot(cases: pd.DataFrame, workload: str, out: Path) -> Path | None:
    """Transfers: a panel per direction, a line per machine and memory kind (pinned or pageable, blocking
    or not). Elementwise: a panel per op and dtype, a line per machine, the memory datasheet peak dashed."""
    rows = _drawable(cases[cases["workload"] == workload], "size", "gbps")
    if rows.empty:
        return None
    transfer = workload == "transfer"
    if transfer:
        rows = rows.assign(panel=rows["direction"].astype(str),
                           line=rows["machine"] + " · " + rows.apply(_transfer_label, axis=1))
    else:
        rows = rows.assign(panel=rows["op"].astype(str) + " · " + rows["dtype"].astype(str), line=rows["machine"])
    return _ladders(rows, "gbps", sorted(rows["panel"].unique()), line_styles(sorted(rows["line"].unique())),
                    lambda device, _: None if transfer else peak_gbps(device),
                    ("memory peak", "bytes per transfer" if transfer else "elements per tensor (log2)", "GB/s"),
                    out / f"{workload}_gbps.png", byte_sizes if transfer else _log2_x)


def _hue_labels(rows: pd.DataFrame, hues: tuple[str, ...]) -> pd.Series:
    """Each row's line name: `col=value` for every hue column the row has a value in, joined (one name for no hue)."""
    if not hues:
        return pd.Series("", index=rows.index)
    named = rows[list(hues)].astype(object).where(rows[list(hues)].notna(), None)
    return named.apply(lambda values: ", ".join(f"{c}={v}" for c, v in zip(hues, values) if v is not None), axis=1)


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
    """The declared hue columns, then every other setting that still varies among the rows of one panel,
    line and x: without it two settings would share a line (a vertical segment at one x)."""
    hues = list(spec.hues)
    keys = ["machine", *spec.panels, spec.x]
    for column in [c for c in SETTING_COLUMNS if c in rows and c not in {*keys, *hues}]:
        if rows.groupby(keys + hues, dropna=False)[column].nunique(dropna=False).max() > 1:
            hues.append(column)
    return tuple(hues)


def _categorical(group: pd.DataFrame, x: str) -> bool:
    """Categories (dtypes, settings) and a panel's single x are points side by side, never a joined line."""
    return group[x].nunique() <= 1 or not pd.api.types.is_numeric_dtype(group[x])


@literal_labels
def spec_plot(rows: pd.DataFrame, spec: PlotSpec, path: Path) -> Path | None:
    """A workload's declared plot: one panel per machine (and per value of `spec.panels`), `spec.y` over
    `spec.x`, a line per value of the hue columns and of any other setting that varies (`told_apart`),
    one style per line name in every panel. Categories are points, dodged so none hides another."""
    rows = rows.dropna(subset=[spec.x, spec.y]) if {spec.x, spec.y} <= set(rows.columns) else rows.iloc[0:0]
    if rows.empty:
        return None
    hues = told_apart(rows, spec)
    rows = rows.assign(_line=_hue_labels(rows, hues))
    labels = sorted(rows["_line"].unique())
    styles = line_styles(labels)
    panels = _spec_panels(rows, spec.panels)
    fig, axes = _panels(len(panels), width=5.0, height=3.6, columns=2)
    for ax, (title, group) in zip(axes, panels):
        lines = sorted(group["_line"].unique())
        categorical = _categorical(group, spec.x)
        categories = sorted(group[spec.x].unique()) if categorical else []
        for index, (label, line) in enumerate(group.groupby("_line", sort=True)):
            line = line.sort_values(spec.x)
            style = styles[label]
            if categorical:  # a point per category, shifted per line: equal values stay visible side by side
                shift = (index - (len(lines) - 1) / 2) * 0.6 / max(len(lines), 1)
                xs = line[spec.x].map(categories.index) + shift
                ax.plot(xs, line[spec.y], label=label or None, **dict(style, linestyle="none"))
            else:
                ax.plot(line[spec.x], line[spec.y], label=label or None, **style)
                _band(ax, line, spec.x, spec.y, str(style["color"]))
        if categorical:
            ax.set_xticks(range(len(categories)), [compact(c) if isinstance(c, float) else str(c) for c in categories])
            ax.set_xlim(-0.5, len(categories) - 0.5)
        elif spec.x == "size":
            byte_sizes(ax)
        elif spec.logx:
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(
                matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:.0f}" if value < 1e5 else compact(value)))
        if spec.logy:
            ax.set_yscale("log")
            _plain_numbers(ax)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(axis_label(spec.x))
        ax.set_ylabel(axis_label(spec.y))
        ax.grid(True, which="both", alpha=0.3)
    if hues:
        _legend(fig, axes)
    return _save(fig, path)
