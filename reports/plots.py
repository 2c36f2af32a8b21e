"""Plots (matplotlib, Agg: no display). Each function writes one PNG and returns its path, or
None when there is nothing to draw; all but the compile plot read the aggregated cases
(gpubench.reports.aggregate.per_case). Readable at twenty machines: small multiples instead of
one crowded axis, log axes where values span decades, labels from the short case ids, datasheet
peaks drawn where known, CPU and GPU memory never on one axis."""

from __future__ import annotations

import functools
import math
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import pandas as pd  # noqa: E402

from gpubench.harness.core.peaks import peak_gbps, peak_tflops  # noqa: E402
from gpubench.harness.records.safe_files import replacing  # noqa: E402
from gpubench.harness.core.workload_spec import PlotSpec  # noqa: E402
from gpubench.reports.markdown import MAX_LABEL_CHARS, short_label  # noqa: E402

MAX_LEGEND = 24
DPI = 110  # a figure is laid out at the resolution it is saved at: tight_layout's text sizes are then savefig's (one renderer)
MAX_PLOT_LABEL = 3 * MAX_LABEL_CHARS + 6  # a machine label at its longest (gpubench.reports.load.base_labels)


def _literal_dollars(frame: pd.DataFrame) -> pd.DataFrame:
    """Text cells with each '$' escaped (a pair of them in a hostname or setting would otherwise
    be typeset as a formula, or stop the plot), and at most MAX_PLOT_LABEL characters (a
    10,000-character model name would fill the legend; short_label keeps labels unique). Looks at
    each distinct text once."""
    escaped = {}
    for column in [c for c in frame.columns if pd.api.types.is_string_dtype(frame[c].dtype)]:  # object or str
        dirty = {v: short_label(v, MAX_PLOT_LABEL).replace("$", "\\$") for v in frame[column].dropna().unique()
                 if isinstance(v, str) and ("$" in v or len(v) > MAX_PLOT_LABEL)}
        if dirty:  # a lookup per cell: DataFrame.replace with a dict compares every cell with every key
            values = frame[column]
            escaped[column] = values.map(dirty).where(values.isin(dirty.keys()), values)
    return frame.assign(**escaped) if escaped else frame


def literal_labels(plot):
    """Every plot draws labels from the CSVs (machines, settings, ops): its rows reach it with
    their '$' escaped (_literal_dollars), the one place plots take untrusted text."""
    @functools.wraps(plot)
    def draw(rows: pd.DataFrame, *args, **kwargs):
        return plot(_literal_dollars(rows), *args, **kwargs)
    return draw


def _save(fig: plt.Figure, path: Path) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fig.tight_layout(rect=(0, getattr(fig, "legend_space", 0.0), 1, 1))  # room for a figure legend below
    try:  # through a temporary in the report's folder: a link planted at the PNG's name is replaced, not followed
        with replacing(path.parent, path.name, "report folder", "pass --out with the folder itself") as handle, \
                warnings.catch_warnings():
            # A host name in a script or emoji the font lacks is drawn as a box: two stderr lines per glyph say no more.
            warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from", category=UserWarning)
            fig.savefig(handle, dpi=DPI, format="png")
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


def _legend(fig: plt.Figure, axes: list[plt.Axes]) -> None:
    handles, labels = {}, []
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label not in handles:
                handles[label] = handle
                labels.append(label)
    if labels:
        longest = max(len(label) for label in labels[:MAX_LEGEND])
        ncol = max(1, min(3, len(labels), int(fig.get_size_inches()[0] / (0.075 * longest + 0.5))))  # ~0.075 inch a character at size 8
        rows = math.ceil(min(len(labels), MAX_LEGEND) / ncol)
        fig.legend([handles[label] for label in labels[:MAX_LEGEND]], labels[:MAX_LEGEND], loc="lower center",
                   ncol=ncol, fontsize=8, frameon=False, bbox_to_anchor=(0.5, 0.0))
        fig.legend_space = min(0.6, 0.2 * rows / fig.get_size_inches()[1])  # 0.2 inch a legend row


def _plain_numbers(ax: plt.Axes, axis: str = "y", fmt: str = "{:.3g}") -> None:
    """Log axes with plain tick labels (0.19, 4.2, 780), not 1.9×10⁻¹, and labels even when the
    data span less than a decade (ticks at 1, 2 and 5 of each decade)."""
    target = ax.yaxis if axis == "y" else ax.xaxis
    target.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    target.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda value, _: fmt.format(value)))
    target.set_minor_formatter(matplotlib.ticker.NullFormatter())


def _band(ax: plt.Axes, series: pd.DataFrame, x: str, y: str, color: str) -> None:
    """The builds' interquartile range as a band around the median line (where several builds ran)."""
    if f"{y}_q1" in series and series[f"{y}_q1"].notna().any():
        ax.fill_between(series[x], series[f"{y}_q1"], series[f"{y}_q3"], color=color, alpha=0.2, linewidth=0)


def _drawable(rows: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """The rows a log-log panel can draw: x and y present and above zero (an ok row with an empty
    setting still has its table row; a panel of nothing would stop the report)."""
    return rows[(rows[x] > 0) & (rows[y] > 0)] if {x, y} <= set(rows.columns) else rows.iloc[0:0]


@literal_labels
def matmul_plot(cases: pd.DataFrame, out: Path) -> Path | None:
    """One panel per dtype: TFLOP/s over n per machine, the datasheet peak dashed."""
    rows = _drawable(cases[cases["workload"] == "matmul"], "size", "tflops")
    if rows.empty:
        return None
    dtypes = [d for d in ("fp32", "tf32", "fp16", "bf16") if d in set(rows["dtype"])]
    if not dtypes:  # rows of a dtype this plot does not know (a hand-made or foreign file): no panel to draw
        return None
    fig, axes = _panels(len(dtypes))
    colors = {m: f"C{i % 10}" for i, m in enumerate(sorted(rows["machine"].unique()))}
    for ax, dtype in zip(axes, dtypes):
        for machine, group in rows[rows["dtype"] == dtype].groupby("machine"):
            series = group.sort_values("size")
            ax.plot(series["size"], series["tflops"], marker="o", color=colors[machine], label=machine)
            _band(ax, series, "size", "tflops", colors[machine])
            peak = peak_tflops(str(series["device_name"].iloc[0]), dtype)
            if peak:
                ax.axhline(peak, color=colors[machine], linestyle="--", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        _plain_numbers(ax)
        ax.set_title(f"{dtype}" + (" (dashed: datasheet peak)" if any(line.get_linestyle() == "--" for line in ax.lines) else ""), fontsize=9)
        ax.set_xlabel("n (square matmul)")
        ax.set_ylabel("TFLOP/s")
        ax.grid(True, which="both", alpha=0.3)
    _legend(fig, axes)
    return _save(fig, out / "matmul_tflops.png")


def _transfer_label(row: pd.Series) -> str:
    return f"{'pinned' if row['pinned'] else 'pageable'}, {'non_blocking' if row['non_blocking'] else 'blocking'}"


@literal_labels
def bandwidth_plot(cases: pd.DataFrame, workload: str, out: Path) -> Path | None:
    """Transfers: a panel per direction and machine-series per memory kind. Elementwise: a panel
    per op and dtype, log axes, the memory datasheet peak dashed."""
    rows = _drawable(cases[cases["workload"] == workload], "size", "gbps")
    if rows.empty:
        return None
    key = "direction" if workload == "transfer" else "panel"
    if workload != "transfer":
        rows = rows.assign(panel=rows["op"].astype(str) + " · " + rows["dtype"].astype(str))
    panels = sorted(rows[key].unique())
    fig, axes = _panels(len(panels))
    for ax, panel in zip(axes, panels):
        group = rows[rows[key] == panel]
        for machine, series in group.groupby("machine"):
            if workload == "transfer":
                for label, line in series.groupby(series.apply(_transfer_label, axis=1)):
                    line = line.sort_values("size")
                    ax.plot(line["size"], line["gbps"], marker="o", label=f"{machine} · {label}")
                    _band(ax, line, "size", "gbps", ax.lines[-1].get_color())
            else:
                line = series.sort_values("size")
                ax.plot(line["size"], line["gbps"], marker="o", label=machine)
                _band(ax, line, "size", "gbps", ax.lines[-1].get_color())
                peak = peak_gbps(str(line["device_name"].iloc[0]))
                if peak:
                    ax.axhline(peak, linestyle="--", linewidth=0.8, color=ax.lines[-1].get_color())
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        _plain_numbers(ax)
        ax.set_title(
            str(panel) + (" (dashed: memory peak)" if workload != "transfer" and any(line.get_linestyle() == "--" for line in ax.lines) else ""), fontsize=9
        )
        ax.set_xlabel("bytes per transfer" if workload == "transfer" else "elements per tensor")
        ax.set_ylabel("GB/s")
        ax.grid(True, which="both", alpha=0.3)
    _legend(fig, axes)
    return _save(fig, out / f"{workload}_gbps.png")


@literal_labels
def epoch_plot(cases: pd.DataFrame, out: Path) -> Path | None:
    """One panel per machine: training samples/s per setting (red: input-bound)."""
    rows = cases[cases["workload"] == "mnist_epoch"]
    if rows.empty:
        return None
    machines = sorted(rows["machine"].unique())
    most = int(rows.groupby("machine").size().max())
    fig, axes = _panels(len(machines), width=6.0, height=0.32 * most + 1.2, columns=2)
    for ax, machine in zip(axes, machines):
        group = rows[rows["machine"] == machine].sort_values("samples_per_s")
        ax.barh(group["setting"], group["samples_per_s"], color=["tab:red" if b is True else "tab:blue" for b in group["input_bound"]])
        values = group["samples_per_s"].dropna()
        wide = len(values) > 1 and values.max() / values.min() >= 10  # a log axis only where the bars span a decade
        if wide:
            ax.set_xscale("log")
            _plain_numbers(ax, "x", "{:,.0f}")
        else:
            ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(5))
            ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:,.0f}"))
        ax.set_title(machine, fontsize=9)
        ax.set_xlabel(f"training samples/s ({'log; ' if wide else ''}red: input-bound)")
        ax.tick_params(axis="y", labelsize=8)
    return _save(fig, out / "mnist_epoch.png")


@literal_labels
def memory_plot(cases: pd.DataFrame, out: Path) -> Path | None:
    """Peak memory against step time, one panel per memory source (never CPU and GPU on one axis)."""
    rows = cases[cases["workload"] == "memory_strategies"]
    if rows.empty:
        return None
    sources = sorted(rows["mem_source"].astype(object).fillna("unknown").unique())
    fig, axes = _panels(len(sources), width=5.5, height=4.2, columns=2)
    colors = {m: f"C{i % 10}" for i, m in enumerate(sorted(rows["machine"].unique()))}
    for ax, source in zip(axes, sources):
        group = rows[rows["mem_source"].astype(object).fillna("unknown") == source]
        for machine, series in group.groupby("machine"):
            ax.scatter(series["step_s"] * 1e3, series["peak_mem_bytes"] / 2**20, label=machine, color=colors[machine])
            for _, row in series.iterrows():
                ax.annotate(str(row["strategy"]), (row["step_s"] * 1e3, row["peak_mem_bytes"] / 2**20), fontsize=7)
        ax.set_xlabel("optimizer step (ms)")
        ax.set_ylabel("peak memory (MiB)")
        ax.set_title(f"memory: {source}", fontsize=9)
    _legend(fig, axes)
    return _save(fig, out / "memory_strategies.png")


@literal_labels
def compile_plot(compiled: pd.DataFrame, out: Path) -> Path | None:
    """Compile cost (s) and step gain (%) per compiled setting (gpubench.reports.tables.compile_table's rows: the
    labels escaped are those drawn, not a whole store's), one bar pair per machine · setting."""
    rows = compiled.dropna(subset=["compile_s"])
    if rows.empty:
        return None
    labels = [f"{s} · {m}" for s, m in zip(rows["setting"], rows["machine"])]
    fig, (cost, gain) = plt.subplots(1, 2, figsize=(11, 0.4 * len(rows) + 1.6), sharey=True, dpi=DPI)
    cost.barh(labels, rows["compile_s"], color="tab:orange")
    cost.set_xlabel("cold compile, first call (s)")
    gain.barh(labels, rows["gain_pct"].fillna(0), color=["tab:green" if g > 0 else "tab:red" for g in rows["gain_pct"].fillna(0)])
    gain.axvline(0, color="grey", lw=0.8)
    gain.set_xlabel("compiled step gain vs eager, same batch (%)")
    cost.tick_params(axis="y", labelsize=8)
    fig.suptitle("torch.compile: cost against gain (break-even steps in the table)", fontsize=10)
    return _save(fig, out / "compile.png")


def _hue_labels(rows: pd.DataFrame, hues: tuple[str, ...]) -> pd.Series:
    """Each row's line name: `col=value` for every hue column, joined (one name for no hue)."""
    if not hues:
        return pd.Series("", index=rows.index)
    named = rows[list(hues)].astype(str)
    return named.apply(lambda values: ", ".join(f"{c}={v}" for c, v in zip(hues, values)), axis=1)


def _spec_panels(rows: pd.DataFrame, panels: tuple[str, ...]) -> list[tuple[str, pd.DataFrame]]:
    """(title, rows) per machine and, where declared, per value of the panel columns."""
    keys = ["machine", *panels]
    out = []
    for values, group in rows.groupby(keys, sort=True):
        values = values if isinstance(values, tuple) else (values,)
        title = str(values[0]) + "".join(f" · {c}={v}" for c, v in zip(panels, values[1:]))
        out.append((title, group))
    return out


def _bar_plot(rows: pd.DataFrame, spec: PlotSpec, path: Path) -> Path:
    """One panel per machine: a horizontal bar of `spec.y` per value of `spec.x`, coloured by `spec.hue`."""
    machines = sorted(rows["machine"].unique())
    most = int(rows.groupby("machine").size().max())
    fig, axes = _panels(len(machines), width=6.0, height=0.32 * most + 1.2, columns=2)
    rows = rows.assign(_line=_hue_labels(rows, spec.hues))
    colours = {hue: f"C{index % 10}" for index, hue in enumerate(sorted(rows["_line"].unique()))}
    for ax, machine in zip(axes, machines):
        group = rows[rows["machine"] == machine].sort_values(spec.y)
        keys = group["_line"]
        ax.barh(group[spec.x].astype(str), group[spec.y], color=[colours[k] for k in keys])
        for hue in dict.fromkeys(keys) if spec.hues else ():
            ax.barh([], [], color=colours[hue], label=hue)  # one legend entry per hue
        values = group[spec.y][group[spec.y] > 0]
        wide = spec.logy and len(values) > 1 and values.max() / values.min() >= 10  # log only where the bars span a decade
        if wide:
            ax.set_xscale("log")
            _plain_numbers(ax, "x")
        ax.set_title(machine, fontsize=9)
        ax.set_xlabel(f"{spec.y} (log)" if wide else spec.y)
        ax.tick_params(axis="y", labelsize=8)
    if spec.hues:
        _legend(fig, axes)
    return _save(fig, path)


@literal_labels
def spec_plot(rows: pd.DataFrame, spec: PlotSpec, path: Path) -> Path | None:
    """A workload's declared plot: one panel per machine (and per value of `spec.panels`),
    `spec.y` over `spec.x`, a line per value of `spec.hue` — one color per line name in every
    panel (gpubench.harness.core.workload_spec.PlotSpec); with `spec.bars`, a bar per setting instead."""
    rows = rows.dropna(subset=[spec.x, spec.y]) if {spec.x, spec.y} <= set(rows.columns) else rows.iloc[0:0]
    if rows.empty:
        return None
    if spec.bars:
        return _bar_plot(rows, spec, path)
    rows = rows.assign(_line=_hue_labels(rows, spec.hues))
    labels = sorted(rows["_line"].unique())
    styles = {label: (f"C{i % 10}", ("-", "--", ":")[i // 10 % 3]) for i, label in enumerate(labels)}
    panels = _spec_panels(rows, spec.panels)
    fig, axes = _panels(len(panels), width=5.0, height=3.6, columns=2)
    for ax, (title, group) in zip(axes, panels):
        for label, line in group.groupby("_line", sort=True):
            line = line.sort_values(spec.x)
            xs = line[spec.x].astype(str) if line[spec.x].dtype == object else line[spec.x]
            color, style = styles[label]
            ax.plot(xs, line[spec.y], marker="o", color=color, linestyle=style, label=label or None)
            _band(ax, line.assign(**{spec.x: xs}), spec.x, spec.y, color)
        if spec.logx:
            ax.set_xscale("log", base=2)
        if spec.logy:
            ax.set_yscale("log")
            _plain_numbers(ax)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(spec.x)
        ax.set_ylabel(spec.y)
        ax.grid(True, which="both", alpha=0.3)
    if spec.hues:
        _legend(fig, axes)
    return _save(fig, path)
