"""A machine's history: headline figures over its runs. A machine is its machine_id (host and
hardware) and device (each GPU of a node has its own history); only machines with two runs or more
get a table row and a plot."""

from __future__ import annotations

import re
from pathlib import Path

from gpubench.reports.render.drawing import matplotlib, plt

import matplotlib.dates  # noqa: E402
import matplotlib.ticker  # noqa: E402
import pandas as pd  # noqa: E402

from gpubench.reports.judge.health import HEALTH_DROP, flag_edge
from gpubench.reports.judge.history import run_figures
from gpubench.reports.judge.load import machine_keys
from gpubench.reports.judge.references import FIGURES, load_references
from gpubench.reports.judge.text import short_label
from gpubench.reports.render import before_after
from gpubench.reports.render.markdown import escape, image, md_table, section
from gpubench.reports.render.plots import _save, literal

MAX_PANEL_COLUMNS = 4
# the y axis spans at least ±5% of a figure's median
REL_WINDOW = 0.05


def _figure_columns(runs: pd.DataFrame) -> list[str]:
    return [c for c in runs.columns if c in FIGURES and runs[c].notna().any()]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def _reference_lines(ax: plt.Axes, reference: float | None, higher_is_better: bool) -> None:
    """The device's gpubench reference (dashed) and the health flag's edge (dotted), where known."""
    if reference is None:
        return
    edge = flag_edge(reference, higher_is_better)
    ax.axhline(reference, color="grey", linestyle="--", linewidth=1, label="reference")
    ax.axhline(
        edge, color="tab:red", linestyle=":", linewidth=1, label=f"{HEALTH_DROP:.0%} below: flagged"
    )


def plot_history(runs: pd.DataFrame, out: Path) -> list[tuple[str, str]]:
    """One PNG per machine (a panel per headline figure, torch versions beside the points, the
    device's reference where known); returns (machine, file name) pairs."""
    written, refs, names = [], load_references(), set()
    for _, group in runs.groupby(machine_keys(runs), sort=False):
        machine = group["machine"].iloc[0]
        figures = [f for f in _figure_columns(runs) if group[f].notna().any()]
        references = {
            r.figure: r.value
            for r in refs.for_device(str(group["device_name"].iloc[0]), "gpubench")
        }
        if not figures:
            continue
        fig, axes = _panels(len(figures))
        for ax, figure in zip(axes, figures):
            points = group.dropna(subset=[figure])
            ax.plot(points["started"], points[figure], marker="o")
            _reference_lines(ax, references.get(figure), FIGURES[figure].higher_is_better)
            halfway = group["started"].min() + (group["started"].max() - group["started"].min()) / 2
            # right of a point, left in the right half
            for torch, started, value in _torch_changes(points, figure):
                late = started > halfway
                ax.annotate(
                    literal(short_label(str(torch))),
                    (started, value),
                    fontsize=7,
                    textcoords="offset points",
                    xytext=(-3, 3) if late else (3, 3),
                    ha="right" if late else "left",
                )
            ax.set_title(f"{FIGURES[figure].label} ({FIGURES[figure].unit})", fontsize=9)
            _relative_window(ax, points[figure])
            _time_axis(ax, group["started"])
        fig.suptitle(f"{literal(str(machine))} — headline figures per run", fontsize=10)
        entries = {
            label: handle for ax in axes for handle, label in zip(*ax.get_legend_handles_labels())
        }
        if entries:
            fig.legend(
                list(entries.values()), list(entries), loc="upper right", fontsize=8, frameon=False
            )
        first = group.iloc[0]
        name = _png_name(
            names, str(first["hostname"]), str(first["machine_id"]), str(first["device"])
        )
        written.append((str(machine), _save(fig, out / name, dpi=100, tight=False).name))
    return written


def _relative_window(ax: plt.Axes, values: pd.Series) -> None:
    """A y range of at least ±REL_WINDOW around the median (runs 0.5% apart are not drawn as a
    cliff), and on the right the same axis as % of the first run."""
    middle, first = abs(float(values.median())), float(values.iloc[0])
    # the points and reference lines with their margins
    low, high = ax.get_ylim()
    ax.set_ylim(min(low, middle * (1 - REL_WINDOW)), max(high, middle * (1 + REL_WINDOW)))
    if first > 0:
        change = ax.secondary_yaxis(
            "right",
            functions=(
                lambda value: (value / first - 1) * 100,
                lambda pct: first * (1 + pct / 100),
            ),
        )
        change.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(5, steps=[1, 2, 2.5, 5, 10]))
        change.yaxis.set_major_formatter(
            matplotlib.ticker.FuncFormatter(lambda pct, _: f"{pct:+.3g}%")
        )
        change.tick_params(labelsize=7)
        change.set_ylabel("vs first run", fontsize=7)


def _time_axis(ax: plt.Axes, started: pd.Series) -> None:
    """The machine's runs from first to last, a tenth of their span either side (a minute either
    side of runs that started together), the same in every panel: runs a minute apart are not lost
    in an hour."""
    first, last = started.min(), started.max()
    pad = (last - first) * 0.1 if last > first else pd.Timedelta(minutes=1)
    ax.set_xlim(first - pad, last + pad)
    # minutes apart: times, not six equal dates
    locator = matplotlib.dates.AutoDateLocator(minticks=2, maxticks=5)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(matplotlib.dates.ConciseDateFormatter(locator))
    ax.tick_params(axis="x", labelsize=7)


def _torch_changes(points: pd.DataFrame, figure: str) -> list[tuple[object, object, float]]:
    """(torch, started, value) of the points whose torch differs from the run before (the first
    included): a label per torch version in use, not one per run."""
    torch = points["torch"].astype(str)
    changed = torch != torch.shift()
    return list(
        zip(
            points.loc[changed, "torch"],
            points.loc[changed, "started"],
            points.loc[changed, figure],
        )
    )


# width, height of one panel with its labels
PANEL_IN = (4.2, 3.2)
# Margins and gaps in inches, fixed: tight_layout measuring every tick label was the largest cost of
# a store's report. Room for 7-character y labels, the change vs the first run on the right, dates
# under each panel, titles and the legend at the top.
LEFT_IN, RIGHT_IN, BOTTOM_IN, TOP_IN, GAP_W_IN, GAP_H_IN = 0.75, 0.75, 0.75, 0.75, 1.3, 1.0


def _panels(count: int) -> tuple[plt.Figure, list[plt.Axes]]:
    """A figure of `count` panels, at most MAX_PANEL_COLUMNS a row, laid out once (fixed
    margins)."""
    cols = min(MAX_PANEL_COLUMNS, count)
    rows = -(-count // cols)
    width, height = PANEL_IN[0] * cols, PANEL_IN[1] * rows + 0.5
    fig, axes = plt.subplots(rows, cols, figsize=(width, height), squeeze=False)
    axis_w = (width - LEFT_IN - RIGHT_IN - (cols - 1) * GAP_W_IN) / cols
    axis_h = (height - BOTTOM_IN - TOP_IN - (rows - 1) * GAP_H_IN) / rows
    fig.subplots_adjust(
        left=LEFT_IN / width,
        right=1 - RIGHT_IN / width,
        bottom=BOTTOM_IN / height,
        top=1 - TOP_IN / height,
        wspace=GAP_W_IN / axis_w,
        hspace=GAP_H_IN / axis_h,
    )
    for extra in axes.flat[count:]:
        extra.set_visible(False)
    return fig, list(axes.flat[:count])


def _png_name(taken: set[str], host: str, machine_id: str, device: str) -> str:
    """`history_<host>_<machine_id's first 8 hex>_<device>.png`, as the store names the machine's
    folder; two machines whose names differ only in what the slug replaces ('a b', 'a_b') get a
    numbered second file."""
    stem = f"history_{_slug(host)[:40]}_{_slug(machine_id)[:8]}_{_slug(device)}"
    name, number = f"{stem}.png", 2
    while name in taken:
        name, number = f"{stem}-{number}.png", number + 1
    taken.add(name)
    return name


def _change(points: pd.DataFrame, figure: str, judged: dict[tuple[str, str, str], str]) -> str:
    """First → last value of a figure, its change, and what compare says of that change between
    those two runs (before_after.history_judgements): a percentage compare calls inconclusive is
    never shown bare."""
    points = points.dropna(subset=[figure])
    if points.empty:
        return ""
    first, last = float(points[figure].iloc[0]), float(points[figure].iloc[-1])
    if len(points) == 1:
        return f"{first:.4g}"
    said = judged.get(
        (points["run_key"].iloc[0], points["run_key"].iloc[-1], figure), "; not judged"
    )
    return f"{first:.4g} → {last:.4g} ({last / first - 1:+.0%}{said})"


def history_table(
    runs: pd.DataFrame, judged: dict[tuple[str, str, str], str] | None = None
) -> pd.DataFrame:
    """One row per machine (the plot holds each run): its runs, dates, torch versions, each headline
    first → last with compare's verdict on it (`judged`: before_after.history_judgements)."""
    rows = []
    for _, group in runs.groupby(machine_keys(runs), sort=False):
        row = {
            "machine": group["machine"].iloc[0],
            "runs": len(group),
            "dates": f"{group['started'].min():%Y-%m-%d} → {group['started'].max():%Y-%m-%d}",
            "torch": ", ".join(dict.fromkeys(group["torch"].astype(str))),
        }
        row.update(
            {
                f"{FIGURES[f].label} ({FIGURES[f].unit})": _change(group, f, judged or {})
                for f in _figure_columns(runs)
            }
        )
        rows.append(row)
    return pd.DataFrame(rows)


NONE_YET = (
    "None yet: no machine here has two runs that each measured a figure History follows ("
    + "; ".join(figure.label for figure in FIGURES.values())
    + "). A machine's history starts with its second such run (`gpubench run --store STORE` on it "
    "again)."
)


def render(frame: pd.DataFrame, out: Path) -> str:
    """The report's history section; when no machine has two runs, one line saying so."""
    runs = run_figures(frame)
    if runs.empty:
        return section("History", NONE_YET)
    plots = plot_history(runs, out)
    intro = (
        "Machines with several runs (dates, torch versions): each headline figure (best size per "
        "run; an epoch is the guide template's) from the first run to the last, with what "
        "`gpubench compare FIRST LAST` says of the case it was read from (its verdict, and the "
        "figure's change at 99% confidence); the plots show every run."
    )
    pictures = "\n".join(
        f"- **{escape(str(machine))}**: " + image(name, "headline figures per run")
        for machine, name in plots
    )
    judged = before_after.history_judgements(frame, runs, _figure_columns(runs))
    return section("History", intro, md_table(history_table(runs, judged)), pictures)
