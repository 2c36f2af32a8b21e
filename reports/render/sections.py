"""The report's workload sections, as each workload declares (gpubench.harness.catalog): a named
renderer where a table is not enough, else a generic section (an optional plot and a table of
declared columns), so a new workload needs no edit here."""

from __future__ import annotations

from pathlib import Path
from collections.abc import Callable

import pandas as pd

from gpubench.harness.core.workload_spec import ReportSection
from gpubench.reports.render import bar_plots, plots
from gpubench.reports.judge import tables
from gpubench.reports.judge.screen import impossible
from gpubench.reports.judge.tables import selfcheck_word, selfcheck_outcomes
from gpubench.reports.judge.aggregate import USER_PREFIX
from gpubench.reports.judge.intervals import BEST_RULE
from gpubench.harness.records.schema import SETTING_COLUMNS
from gpubench.reports.render.markdown import (
    Md,
    code,
    constant_columns,
    image,
    md_rows,
    md_table,
    paragraph,
    same_rows_folded,
    section,
)
from gpubench.reports.render.summary import bandwidth_cell, pm
from gpubench.reports.judge.intervals import steady_best
from gpubench.reports.render.units import human, human_column
from gpubench.harness.core.percent import percent

Renderer = Callable[[pd.DataFrame, pd.DataFrame, Path, ReportSection, str], str]


# a longer table of several machines gets a row per setting and a column per machine
PIVOT_ROWS = 12


def several_machines(table: pd.DataFrame, rows: int = PIVOT_ROWS) -> bool:
    """A table longer than `rows`, of two or more machines: better as a row per setting, a column
    per machine."""
    return "machine" in table and table["machine"].nunique() >= 2 and len(table) > rows


def machine_columns(table: pd.DataFrame, keys: list[str], cells: list[str]) -> pd.DataFrame:
    """`table` as a row per value of `keys` and a column per machine holding `cells` (one text per
    row)."""
    grouped = (
        table.assign(_cell=cells)
        .groupby([*keys, "machine"], sort=False, dropna=False)["_cell"]
        .first()
    )
    # only the settings a machine ran
    return grouped.unstack("machine").fillna("").reset_index().rename_axis(columns=None)


def folded(
    table: pd.DataFrame, keys: list[str], cells: list[str], fold: str
) -> tuple[pd.DataFrame, list[str]]:
    """Rows that differ only in `fold` as one row per machine, their cells joined after the value
    they differ in ('no_grad 217 k samples/s · inference_mode 368 k samples/s'); the keys left."""
    rest = [key for key in keys if key != fold]
    labelled = table.assign(
        _cell=[f"{value} {text}" if text else "" for value, text in zip(table[fold], cells)]
    )
    joined = (
        labelled.groupby([*rest, "machine"], sort=False, dropna=False)["_cell"]
        .agg(lambda texts: " · ".join(text for text in texts if text))
        .reset_index()
    )
    return joined, rest


def by_machine(table: pd.DataFrame, fold: str | None = None) -> pd.DataFrame | None:
    """A long table of several machines pivoted, each cell the first figure with its spread and
    flags (the cells of a `fold` setting's values joined in one); None where the table is short, of
    one machine, or its first figure is not a number."""
    if not several_machines(table):
        return None
    keys = [c for c in table.columns if c in SETTING_COLUMNS and c != "machine"]
    # the headline figure; merged.csv has the rest
    figures = [c for c in table.columns if c not in {*keys, "machine", "spread", "flags"}][:1]
    if not keys or not figures or not pd.api.types.is_numeric_dtype(table[figures[0]]):
        return None
    spread = table["spread"] if "spread" in table else pd.Series(float("nan"), index=table.index)
    flags = table["flags"] if "flags" in table else pd.Series("", index=table.index)
    cells = [
        human_column(figures[0], v) + pm(s) + (f" ({fl})" if fl else "") if not pd.isna(v) else ""
        for v, s, fl in zip(table[figures[0]], spread, flags)
    ]
    if fold in keys:
        table, keys = folded(table, keys, cells, fold)
        cells = list(table["_cell"])
    return machine_columns(table, keys, cells)


def peak_cell(best: pd.Series) -> str:
    """One machine's best matmul of a dtype: '583 TFLOP/s at n=4096, 59% of 989 TFLOP/s peak (1
    build)'."""
    spread = f", spread {percent(best['spread'], 1)}" if pd.notna(best["spread"]) else ""
    of_peak = (
        f", {best['pct_of_peak']:.3g}% of {human_column('tflops', best['peak_tflops'])} peak"
        if pd.notna(best["peak_tflops"])
        else ""
    )
    builds = f"{best['builds']:.0f} build" + ("s" if best["builds"] != 1 else "")
    return (
        f"{human_column('tflops', best['tflops'])} at n={best['size']:.0f}{of_peak} "
        f"({builds}{spread})"
    )


def matmul(
    frame: pd.DataFrame, cases: pd.DataFrame, out: Path, spec: ReportSection, workload: str
) -> str:
    peak = tables.matmul_peak_table(cases)
    several = not peak.empty and peak["machine"].nunique() > 1
    table = (
        md_table(machine_columns(peak, ["dtype"], [peak_cell(row) for _, row in peak.iterrows()]))
        if several
        else md_table(peak, human=True)
    )
    return section(
        spec.title,
        image(plots.matmul_plot(cases, out), "matmul TFLOP/s"),
        "Best TFLOP/s per dtype (median over builds), against the datasheet peak where the "
        f"device is known; {BEST_RULE}; `spread` is the IQR/median of the builds' TFLOP/s; bands "
        "in the plot span the builds' IQR (the datasheet peaks gpubench knows: `gpubench env "
        "--peaks`):",
        table,
    )


def matmul_speedup(
    frame: pd.DataFrame, cases: pd.DataFrame, out: Path, spec: ReportSection, workload: str
) -> str:
    speedup = cases[cases["workload"] == workload].rename(
        columns={"baseline_median_s": "cpu_median_s", "median_s": "device_median_s"}
    )
    if speedup.empty:
        return ""
    columns = ["machine", "size", "cpu_median_s", "device_median_s", "speedup"]
    # a line or two below the Matmul section's table: too short for a section of its own
    return Md("**{}**: ").format(spec.title) + md_rows(
        same_rows_folded(speedup[columns]), human=True
    )


def best_bandwidth(
    frame: pd.DataFrame, cases: pd.DataFrame, workload: str, tier: str | None
) -> dict[str, str]:
    """Per machine, the GB/s the summary says for `workload` (and memory tier): the same case, the
    same figure."""
    mine = cases[cases["workload"] == workload]
    if tier is not None:
        mine = mine[mine["memory_tier"] == tier]
    pool = None
    if tier == "dram":
        pool = (frame["workload"] == workload) & (frame.get("memory_tier") == tier)
    cells: dict[str, str] = {}
    for machine, rows in mine.groupby("machine", sort=False):
        best = steady_best(rows.dropna(subset=["gbps"]), "gbps")
        if best is not None:
            cells[str(machine)] = Md("{} {}").format(
                bandwidth_cell(frame, best, None, pool), code(best["case_id"])
            )
    return cells


def bandwidth(
    frame: pd.DataFrame, cases: pd.DataFrame, out: Path, spec: ReportSection, workload: str
) -> str:
    """Best GB/s per machine, as the summary says it (the median of the best case's builds); for
    elementwise the headline is DRAM-resident sizes only, cache-resident ones apart."""
    png = plots.bandwidth_plot(cases, workload, out)
    if not png:
        return ""
    tiers = [None] if workload != "elementwise" else ["dram", "cache"]
    table = pd.DataFrame(
        {tier or "best GB/s": best_bandwidth(frame, cases, workload, tier) for tier in tiers}
    )
    table.index.name = "machine"
    headline = [md_table(table.astype(object).fillna(""), index=True)]
    if workload == "elementwise":
        headline.insert(
            0,
            "GB/s by memory tier, as the summary says them (the best case by its builds' lower "
            "quartile; the median of its builds): `dram` = each array >= 4x the last-level cache, "
            "every instance summed (STREAM's rule; the memory headline), `cache` = the working "
            "set fits in it.",
        )
    return section(spec.title, image(png, f"{workload} GB/s"), *headline)


def selfcheck(
    frame: pd.DataFrame, cases: pd.DataFrame, out: Path, spec: ReportSection, workload: str
) -> str:
    checks = frame[frame["workload"] == workload].assign(
        ran=lambda f: f["status"].isin(["ok", "failed"]), failed=lambda f: f["status"] == "failed"
    )
    rows = (
        checks.assign(outcome=selfcheck_outcomes(checks))
        .groupby(["machine", "size"], sort=False)
        .agg(
            result=("outcome", selfcheck_word),
            builds=("ran", "sum"),
            failed=("failed", "sum"),
            median_s=("median_s", "median"),
            selfcheck_tub_ratio=("selfcheck_tub_ratio", "median"),
            selfcheck_events_ratio=("selfcheck_events_ratio", "median"),
        )
        .reset_index()
    )
    return section(
        spec.title,
        "Median over interleaved pairs of windows of harness / torch.utils.benchmark (and / CUDA "
        "events): a build fails when the median's 99% confidence interval lies wholly outside "
        "0.97–1.03 — one of the clocks is wrong (the failures are listed under Rows not ok); a "
        "median outside the band that noise or load leaves unclear is measured again, then marked "
        "inconclusive. `builds` counts the builds that ran; a size none ran reads `skipped` (why: "
        "Rows not ok).",
        md_table(same_rows_folded(rows), human=True),
    )


def windows_pm(spread: float) -> str:
    """' windows ±x%': the spread of the step windows inside one epoch, never to be read as `±`
    between builds."""
    return f" windows {pm(spread).strip()}" if pm(spread) else ""


def epoch_settings(epochs: pd.DataFrame) -> str:
    """The epoch table; of several machines and many settings, a row per setting and a cell per
    machine."""
    if not several_machines(epochs):
        return md_table(epochs, human=True)
    cells = [
        f"{human_column('epoch_s', e)}{pm(s)}{windows_pm(ws)}, accuracy "
        f"{human_column('test_accuracy', a)}, data wait {human_column('data_wait_frac', w)}"
        + (f" ({f})" if f else "")
        for e, s, ws, a, w, f in zip(
            epochs["epoch_s"],
            epochs["spread"],
            epochs["windows_spread"],
            epochs["test_accuracy"],
            epochs["data_wait_frac"],
            epochs["flags"],
        )
    ]
    return md_table(machine_columns(epochs, ["setting"], cells))


def template_versus(row: pd.Series) -> Md:
    """One machine's line of tables.template_vs_fastest: 'on M, `preloaded` is 3.95x faster than the
    guide template (faster but less accurate: …)'."""
    if row["fastest_setting"] == tables.TEMPLATE_SETTING:
        return Md("on {}, the guide template is the fastest setting measured").format(
            row["machine"]
        )
    ratio = (
        Md(" is {:.3g}x faster than the guide template").format(row["template_over_fastest"])
        if pd.notna(row["template_over_fastest"])
        else Md(" is fastest (no guide template ran)")
    )
    less = (
        Md(" (faster but less accurate: {})").format(row["faster_but_less_accurate"])
        if row["faster_but_less_accurate"]
        else ""
    )
    return Md("on {}, {}{}{}").format(row["machine"], code(row["fastest_setting"]), ratio, less)


def mnist_epoch(
    frame: pd.DataFrame, cases: pd.DataFrame, out: Path, spec: ReportSection, workload: str
) -> str:
    notes = (
        "**Accuracy is meaningless on `synthetic` data.**"
        if (frame["dataset"] == "synthetic").any()
        else ""
    )
    parts = [
        section(
            spec.title,
            image(bar_plots.epoch_plot(cases, out), "epoch throughput"),
            "Guide template against the fastest setting whose test accuracy is within "
            f"{tables.EQUAL_ACCURACY} of the template's (both in the table below; faster but less "
            "accurate settings named apart; diverged runs are failed rows and never count): "
            + "; ".join(
                template_versus(row) for _, row in tables.template_vs_fastest(frame).iterrows()
            )
            + ". Medians over builds and runs; `spread` (`±`) is between builds, `windows_spread` "
            "(`windows ±`) the IQR/median of one epoch's windows of steps.",
            epoch_settings(tables.epoch_table(frame)),
            notes,
        )
    ]
    compiled = tables.compile_table(frame)
    if not compiled.empty:
        # a part of the epoch's section: its compiled settings' cold compile against their step
        parts += [
            image(bar_plots.compile_plot(compiled, out), "compile cost"),
            paragraph(
                "**torch.compile**: cold first-call compile time (fresh dynamo state, empty "
                "inductor cache) against the steady-state step, eager and compiled on the same "
                "batch; break-even = compile time / step gain. Medians over runs.",
                md_rows(same_rows_folded(compiled), human=True),
            ),
        ]
    return "\n\n".join(parts)


def time_to_accuracy(
    frame: pd.DataFrame, cases: pd.DataFrame, out: Path, spec: ReportSection, workload: str
) -> str:
    table, said = constant_columns(tables.time_to_accuracy_table(frame), human=True)
    intro = (
        "MLPerf's clock: from the first touch of the data to the evaluation that reaches the "
        "target (every evaluation inside it; model construction, warm-up and compile outside). "
        "Scored over seeds with the olympic mean (fastest and slowest dropped); a seed without a "
        "time to target counts as the slowest, two make the result invalid. A seed stopped before "
        "its target by its epoch cap (`not_converged`) or by its share of a run budget "
        "(`stopped_by_budget`) is an `unreached` row: `unreached` shows the accuracy it reached "
        "and the time it trained, never a time to target. `fastest_seed_s`/`slowest_seed_s` span "
        "the converged seeds."
    )
    firsts = [first_line(row) for _, row in tables.first_to_target(frame).iterrows()]
    return section(
        spec.title, " ".join(filter(None, [intro, *firsts, said])), md_table(table, human=True)
    )


def first_line(row: pd.Series) -> Md:
    """A machine's first design to target against the template, as in the table below and the
    summary."""
    energy = (
        Md(", {} against {}").format(
            human(row["first_energy_j"], "J"), human(row["template_energy_j"], "J")
        )
        if pd.notna(row["first_energy_j"]) and pd.notna(row["template_energy_j"])
        else ""
    )
    return Md("First to {} on {}: {}, {} against the template's {} ({:.3g}x){}.").format(
        human_column("target_accuracy", row["target_accuracy"]),
        row["machine"],
        code(row["first_design"]),
        human(row["first_s"], "s"),
        human(row["template_s"], "s"),
        row["template_over_first"],
        energy,
    )


def memory_strategies(
    frame: pd.DataFrame, cases: pd.DataFrame, out: Path, spec: ReportSection, workload: str
) -> str:
    return section(
        spec.title,
        image(bar_plots.memory_plot(cases, out), "memory vs speed"),
        "`mem_source`: cuda-allocator = the caching allocator's peak; cpu-profiler = the CPU "
        "allocator's peak over one step above what was alive before it (never compare the two).",
        strategies_table(cases[cases["workload"] == workload]),
    )


def strategies_table(rows: pd.DataFrame) -> str:
    """Per strategy: its step, peak memory (and where it was read) and throughput; a column per
    machine if several."""
    table = rows[
        [
            c
            for c in (
                "machine",
                "strategy",
                "mem_source",
                "effective_batch",
                "peak_mem_bytes",
                "step_s",
                "spread",
                "samples_per_s",
            )
            if c in rows
        ]
    ]
    if not several_machines(table):
        return md_table(table, human=True)
    cells = [
        f"step {human_column('step_s', t)}{pm(s)}, peak {human_column('peak_mem_bytes', m)} "
        f"({src}), {human_column('samples_per_s', r)}"
        for t, s, m, src, r in zip(
            table["step_s"],
            table["spread"],
            table["peak_mem_bytes"],
            table["mem_source"],
            table["samples_per_s"],
        )
    ]
    return md_table(machine_columns(table, ["strategy", "effective_batch"], cells))


# shown by a workload without a table
RATES = ("samples_per_s", "tflops", "gbps", "energy_j", "samples_per_j")


def figures_of(rows: pd.DataFrame) -> list[str]:
    """The throughput, energy and user figures (`user.<name>`) these cases hold."""
    present = [c for c in RATES if c in rows and rows[c].notna().any()]
    return present + sorted(
        c for c in rows.columns if c.startswith(USER_PREFIX) and rows[c].notna().any()
    )


def generic(
    frame: pd.DataFrame, cases: pd.DataFrame, out: Path, spec: ReportSection, workload: str
) -> str:
    """A declared plot (if any) and a table of the declared columns (all settings and figures when
    none are)."""
    rows = cases[cases["workload"] == workload]
    if rows.empty:
        return ""
    draw = bar_plots.spec_bars if spec.plot is not None and spec.plot.bars else plots.spec_plot
    png = draw(rows, spec.plot, out / f"{workload}.png") if spec.plot is not None else None
    columns = list(
        spec.table or ("machine", "setting", "median_s", "spread", *figures_of(rows), "flags")
    )
    if "flags" not in columns and impossible(rows["flags"]).any():
        # a figure past its bound is never shown bare: the summary leaves it out, the table says why
        columns.append("flags")
    table = rows[[c for c in columns if c in rows]]
    pivoted = by_machine(table, spec.fold)
    return section(
        spec.title,
        image(png, workload),
        spec.intro,
        md_table(same_rows_folded(table), human=True)
        if pivoted is None
        else md_table(pivoted.fillna("")),
    )


RENDERERS: dict[str, Renderer] = {
    "matmul": matmul,
    "matmul_speedup": matmul_speedup,
    "bandwidth": bandwidth,
    "selfcheck": selfcheck,
    "mnist_epoch": mnist_epoch,
    "time_to_accuracy": time_to_accuracy,
    "memory_strategies": memory_strategies,
}
