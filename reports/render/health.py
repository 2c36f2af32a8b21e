"""The report's health sections: each machine's headline figures against its device's reference,
the causes to check for a flagged one, and the GPUs of a node against each other, as the judge
found them (gpubench.reports.judge.health)."""

from __future__ import annotations

import pandas as pd

from gpubench.reports.judge.health import (
    HEALTH_DROP,
    OUTLIER_OFF,
    causes,
    health_table,
    latest_headlines,
    outlier_table,
    unknown_gpus,
)
from gpubench.reports.judge.references import FIGURES, References, load_references
from gpubench.reports.render.markdown import escape, md_table, section


def _display(table: pd.DataFrame) -> pd.DataFrame:
    """Figures at 4 significant digits (4343 GB/s, not 4.34e+03), ratios at 2 decimals."""
    # every figure from the newest runs: no column to say so
    out = table.drop(
        columns=["key", "run_id"] + (["run"] if (table["run"] == "").all() else [])
    ).copy()
    formats = {
        "measured": ".4g",
        "reference": ".4g",
        "published max": ".4g",
        "ratio": ".2f",
        "of published": ".2f",
    }
    for column, fmt in formats.items():
        out[column] = ["" if pd.isna(value) else format(value, fmt) for value in out[column]]
    return out if out["machine"].nunique() < 2 else by_figure(out)


def by_figure(table: pd.DataFrame) -> pd.DataFrame:
    """Several machines: a row per figure, a column per machine."""

    def cell(row: pd.Series) -> str:
        text = f"{row['measured']} vs {row['reference']}: {row['ratio']} ({row['health']})"
        text += (
            f"; {row['of published']} of published {row['published max']}"
            if row["of published"]
            else ""
        )
        return text + (f"; {row['run']}" if row.get("run") else "")

    cells = table.assign(cell=table.apply(cell, axis=1))
    return (
        cells.pivot_table(
            index="figure", columns="machine", values="cell", aggfunc="first", sort=False
        )
        .fillna("")
        .reset_index()
    )


def _no_reference(missing: list[str]) -> str:
    """What to do about the devices without a reference."""
    return (
        f"No reference for {', '.join(map(escape, missing))}: add its figures, with their source, "
        "to `reports/references.json`."
        if missing
        else ""
    )


def _flag_lines(
    frame: pd.DataFrame, table: pd.DataFrame, refs: References, power_caps_w: dict[str, float]
) -> str:
    flagged = (
        table[(table["health"] != "ok") & (table["health"] != "")] if not table.empty else table
    )
    parts = []
    # the causes of each run its flags are from
    for (machine, run_id), group in flagged.groupby(["machine", "run_id"], sort=False):
        figures = "; ".join(
            f"{FIGURES[k].label} at {r:.0%}" for k, r in zip(group["key"], group["ratio"])
        )
        run = group["run"].iloc[0]
        earlier = f" ({escape(run)}: its newest run did not measure it)" if run else ""
        lines = "\n".join(
            f"  - {line}" for line in causes(frame, str(machine), refs, power_caps_w, str(run_id))
        )
        parts.append(
            f"- **{escape(str(machine))}**: {figures} of the reference{earlier}. "
            f"Causes to check{', in that run' if earlier else ''}:\n{lines}"
        )
    return "\n".join(parts)


def render(
    frame: pd.DataFrame, cases: pd.DataFrame, power_caps_w: dict[str, float] | None = None
) -> str:
    """The report's health sections (markdown), or "" when there is nothing to say."""
    refs = load_references()
    # once for both tables: the section's costliest step on a store
    heads = latest_headlines(frame, cases)
    table = health_table(frame, cases, refs, heads)
    parts = []
    if not table.empty:
        intro = (
            "Each machine's headline figures against its device's reference "
            "(`reports/references.json`, sources there and in docs/health.md). `ratio` is "
            "performance against the gpubench reference (above 1: better; for a time, "
            f"reference/measured); a figure {HEALTH_DROP:.0%} or more below it is flagged. `of "
            "published` sets the figure against a published maximum measured another way "
            "(mamf-finder's shape search): context, never flagged. A machine with several runs "
            "is judged on its latest run of each figure (History shows the earlier ones). With "
            "several machines a cell reads `measured vs reference: ratio (health)`."
        )
        judged = frame[frame["machine"].isin(set(table["machine"]))]
        unjudged = sorted(
            set(frame["device_name"].astype(str)) - set(judged["device_name"].astype(str))
        )
        parts.append(
            section(
                "Health against references",
                " ".join(filter(None, [intro, _no_reference(unjudged)])),
                md_table(_display(table)),
                _flag_lines(frame, table, refs, power_caps_w or {}),
            )
        )
    # say why nothing is judged
    elif unknown := unknown_gpus(frame, refs):
        parts.append(section("Health against references", "Not judged. " + _no_reference(unknown)))
    outliers = outlier_table(frame, cases, heads)
    if not outliers.empty:
        parts.append(
            section(
                "GPUs within a node",
                "Each GPU of a node against the median of the node's GPUs (`--device cuda:all`); "
                f"one {OUTLIER_OFF:.0%} or more off on a headline is an outlier.",
                md_table(outliers),
            )
        )
    return "\n\n".join(parts)
