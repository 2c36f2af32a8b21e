"""Bar charts for cases that are settings rather than a ladder. Machines are compared on one axis, a
bar per machine beside the others (beyond MAX_GROUPED, a panel each on one shared scale); a log axis
only where the bars span a decade, the same for every panel of a figure."""

from __future__ import annotations

from pathlib import Path

# before matplotlib's modules: Agg, whatever MPLBACKEND says
from gpubench.reports.render.drawing import plt
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from gpubench.harness.core.workload_spec import PlotSpec
from gpubench.reports.judge.aggregate import column_or
from gpubench.reports.judge.settled import is_busy
from gpubench.reports.render.plot_marks import plotted_rows
from gpubench.reports.render.plots import (
    DPI,
    KEY,
    _legend,
    _panels,
    _save,
    axis_label,
    bytes_column,
    literal_labels,
    scale_axis,
)

# machines side by side per setting; more would make bars thinner than their labels
MAX_GROUPED = 6
# inches a bar takes
BAR_IN = 0.22
INPUT_BOUND_HATCH = "//"
BUSY_EDGE = "red edge: measured while another process was busy"
EPOCH_BARS = "error bars: IQR over builds (one build: of its epoch's step windows)"


def fastest_first(rows: pd.DataFrame, value: str) -> list[str]:
    """The settings, the best median over machines on top."""
    return list(rows.groupby("setting")[value].median().sort_values(ascending=False).index)


def grouped(
    ax: plt.Axes,
    rows: pd.DataFrame,
    value: str,
    settings: list[str],
    machines: list[str],
    hatched: pd.Series | None = None,
) -> None:
    """A row per setting, a bar per machine within it; `hatched` marks the rows to draw hatched
    (input-bound); a row's `_low`/`_high` (where present) draw its spread as an error bar; a busy
    row's bar is edged in red."""
    height = 0.8 / len(machines)
    for index, machine in enumerate(machines):
        mine = rows[rows["machine"] == machine].drop_duplicates("setting").set_index("setting")
        present = [s for s in settings if s in mine.index]
        offset = (index - (len(machines) - 1) / 2) * height
        values = mine.loc[present, value]
        spread = error_bars(mine.loc[present], values)
        busy = is_busy(mine.loc[present])
        bars = ax.barh(
            [settings.index(s) + offset for s in present],
            values,
            height=height,
            xerr=spread,
            error_kw={"ecolor": "black", "capsize": 2, "elinewidth": 0.8},
            color=f"C{index % 10}",
            edgecolor=["red" if b else "none" for b in busy],
            linewidth=1.5,
            label=machine,
        )
        if hatched is not None:
            for bar, setting in zip(bars, present):
                if bool(hatched.get(mine.loc[setting, "_row"], False)):
                    bar.set_hatch(INPUT_BOUND_HATCH)
    ax.set_yticks(range(len(settings)), settings)
    # the first setting on top
    ax.set_ylim(len(settings) - 0.5, -0.5)
    ax.tick_params(axis="y", labelsize=8)


def error_bars(rows: pd.DataFrame, values: pd.Series) -> list[pd.Series] | None:
    """Each bar's distance down to `_low` and up to `_high`, None where the rows carry no spread."""
    if "_low" not in rows:
        return None
    return [(values - rows["_low"]).clip(lower=0), (rows["_high"] - values).clip(lower=0)]


def value_axis(axes: list[plt.Axes], values: pd.Series, label: str, in_bytes: bool = False) -> None:
    """One scale for every panel: log where the positive values span a decade, compact numbers
    either way; bytes in binary units."""
    for ax in axes:
        scale_axis(ax, values, "x", "bytes" if in_bytes else "value")
        ax.set_xlabel(f"{label} (log)" if ax.get_xscale() == "log" else label)
        ax.grid(True, axis="x", which="both", alpha=0.3)
    positive = values[values > 0]
    if len(axes) > 1 and len(positive):
        low = (
            positive.min() / 1.5
            if axes[0].get_xscale() == "log"
            else min(0.0, float(values.min()) * 1.05)
        )
        for ax in axes:
            ax.set_xlim(low, float(values.max()) * 1.15)


def setting_bars(
    rows: pd.DataFrame,
    value: str,
    label: str,
    path: Path,
    hatched: pd.Series | None = None,
    hatch_label: str = "",
    spread_label: str = "",
) -> Path:
    """Settings as bars: one chart with a bar per machine, or a panel per machine on one scale."""
    rows = rows.assign(_row=rows.index)
    machines = sorted(rows["machine"].unique())
    settings = fastest_first(rows, value)
    if len(machines) <= MAX_GROUPED:
        fig, ax = plt.subplots(figsize=(8.0, BAR_IN * len(settings) * len(machines) + 1.6), dpi=DPI)
        grouped(ax, rows, value, settings, machines, hatched)
        axes = [ax]
    else:
        most = int(rows.groupby("machine").size().max())
        fig, axes = _panels(len(machines), width=6.0, height=BAR_IN * most + 1.2, columns=2)
        for ax, machine in zip(axes, machines):
            mine = rows[rows["machine"] == machine]
            grouped(ax, mine, value, fastest_first(mine, value), [machine], hatched)
            ax.set_title(machine, fontsize=9)
    value_axis(axes, rows[value], label, bytes_column(value))
    _legend(fig, axes, bar_keys(rows, hatched, hatch_label, spread_label))
    return _save(fig, path)


def bar_keys(
    rows: pd.DataFrame, hatched: pd.Series | None, hatch_label: str, spread_label: str
) -> tuple[Artist, ...]:
    """The legend's keys for what the bars carry: hatching, error bars, a busy edge."""
    keys: list[Artist] = []
    if hatch_label and hatched is not None and hatched.any():
        keys.append(
            Patch(
                facecolor="white",
                edgecolor="black",
                hatch=INPUT_BOUND_HATCH,
                label=hatch_label,
                gid=KEY,
            )
        )
    if spread_label and "_low" in rows:
        keys.append(
            Line2D([], [], color="black", marker="|", linewidth=0.8, label=spread_label, gid=KEY)
        )
    if is_busy(rows).any():
        keys.append(
            Patch(facecolor="white", edgecolor="red", linewidth=1.5, label=BUSY_EDGE, gid=KEY)
        )
    return tuple(keys)


def epoch_spread(rows: pd.DataFrame) -> pd.DataFrame:
    """`_low`/`_high` of each setting's samples/s: the builds' IQR where several built it (the
    report's `±`), else the IQR of its one epoch's step windows (the report's `windows ±`), as the
    table beside the plot prints them."""
    rate = rows["samples_per_s"]
    windows = column_or(rows, "rel_iqr", float("nan")).astype(float).fillna(0.0) / 2
    several = column_or(rows, "builds", 1).fillna(1).astype(float) > 1
    low = column_or(rows, "samples_per_s_q1", float("nan")).where(several, rate / (1 + windows))
    high = column_or(rows, "samples_per_s_q3", float("nan")).where(
        several, rate / (1 - windows.clip(upper=0.9))
    )
    return rows.assign(_low=low.fillna(rate), _high=high.fillna(rate))


@literal_labels
def epoch_plot(cases: pd.DataFrame, out: Path) -> Path | None:
    """Training samples/s per epoch setting, machines side by side; hatched where the epoch waited
    for its data; the spread the tables print as error bars."""
    rows = cases[(cases["workload"] == "mnist_epoch") & (cases["samples_per_s"] > 0)]
    if rows.empty:
        return None
    bound = rows["input_bound"].map(lambda value: value is True or value == "True")
    return setting_bars(
        epoch_spread(rows),
        "samples_per_s",
        "training samples/s",
        out / "mnist_epoch.png",
        hatched=bound,
        hatch_label="hatched: input-bound (waits for data)",
        spread_label=EPOCH_BARS,
    )


@literal_labels
def memory_plot(cases: pd.DataFrame, out: Path) -> Path | None:
    """Per memory source (CPU and GPU memory never on one axis): each strategy's step time and peak
    memory."""
    rows = cases[(cases["workload"] == "memory_strategies") & (cases["step_s"] > 0)]
    if rows.empty:
        return None
    # like for like: a step of 64 samples is not set against one of 256
    per_sample = column_or(rows, "effective_batch", float("nan")).nunique() > 1
    time_label = "optimizer step per sample (µs)" if per_sample else "optimizer step (ms)"
    step = rows["step_s"] * 1e6 / rows["effective_batch"] if per_sample else rows["step_s"] * 1e3
    rows = rows.assign(
        setting=rows["strategy"].astype(str),
        step_ms=step,
        peak_mib=rows["peak_mem_bytes"] / 2**20,
        source=rows["mem_source"].astype(object).fillna("unknown"),
    )
    sources, machines = sorted(rows["source"].unique()), sorted(rows["machine"].unique())
    # the fastest strategy on top
    settings = fastest_first(rows.assign(neg=-rows["step_ms"]), "neg")
    height = (BAR_IN * len(settings) * len(machines) + 1.4) * len(sources)
    fig, grid = plt.subplots(len(sources), 2, figsize=(11.0, height), squeeze=False, dpi=DPI)
    for (time_ax, memory_ax), source in zip(grid, sources):
        mine = rows[rows["source"] == source]
        grouped(time_ax, mine, "step_ms", settings, machines)
        grouped(memory_ax, mine, "peak_mib", settings, machines)
        # each source's memory on its own scale, named in its label: a profiler's bytes are not an
        # allocator's
        value_axis([memory_ax], mine["peak_mib"].dropna(), f"peak memory, {source} (MiB)")
        memory_ax.tick_params(axis="y", labelleft=False)
    # one time scale for every source
    value_axis(list(grid[:, 0]), rows["step_ms"], time_label)
    # a busy row's bar is edged in red (grouped): the legend says so, as the epoch plot's does
    _legend(fig, list(grid.flat), bar_keys(rows, None, "", ""))
    return _save(fig, out / "memory_strategies.png")


@literal_labels
def compile_plot(compiled: pd.DataFrame, out: Path) -> Path | None:
    """Cold compile time and the compiled step's gain per setting (compile_table's rows); break-even
    is in the table."""
    rows = compiled.dropna(subset=["compile_s"]).assign(
        gain_pct=lambda f: f["gain_pct"].fillna(0.0)
    )
    if rows.empty:
        return None
    machines, settings = sorted(rows["machine"].unique()), fastest_first(rows, "gain_pct")
    fig, (cost, gain) = plt.subplots(
        1, 2, figsize=(11.0, BAR_IN * len(settings) * len(machines) + 1.8), sharey=True, dpi=DPI
    )
    grouped(cost, rows, "compile_s", settings, machines)
    grouped(gain, rows, "gain_pct", settings, machines)
    value_axis([cost], rows["compile_s"], "cold compile, first call (s)")
    value_axis([gain], rows["gain_pct"], "step gain vs eager (%)")
    gain.axvline(0, color="grey", lw=0.8)
    fig.suptitle("torch.compile: cost against gain", fontsize=10)
    _legend(fig, [cost, gain])
    return _save(fig, out / "compile.png")


@literal_labels
def spec_bars(rows: pd.DataFrame, spec: PlotSpec, path: Path) -> Path | None:
    """A workload's declared bars: `spec.y` per value of `spec.x` (its settings), machines side by
    side."""
    rows = plotted_rows(rows, spec)
    if rows.empty:
        return None
    return setting_bars(
        rows.assign(setting=rows[spec.x].astype(str)), spec.y, axis_label(spec.y), path
    )
