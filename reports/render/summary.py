"""The report's one-screen summary: machines as columns, each headline figure with its spread as a
row."""

from __future__ import annotations

import math

import pandas as pd

from gpubench.harness.catalog import specs
from gpubench.harness.core.percent import percent
from gpubench.reports.judge.aggregate import column_or
from gpubench.reports.judge.intervals import (
    by_speed,
    pair_timings,
    run_interval,
    speedup_interval,
    steady_best,
    timings_by_machine,
)
from gpubench.reports.render.markdown import Md, code
from gpubench.reports.judge.modes import claimed_gbps
from gpubench.reports.judge.settled import BUSY_ONLY, busy_only, marked
from gpubench.reports.judge.tables import (
    epoch_table,
    fastest_at_equal_accuracy,
    first_to_target,
    template_row,
)
from gpubench.reports.render.units import human


def interval_text(rows: pd.DataFrame, figure: str, unit: str = "") -> str:
    """' (95% 0.148–0.175)': where another run on this machine would read `figure` of these ok
    builds of one case (intervals.run_interval: their spread and the noise between identical
    runs)."""
    ok = rows[rows["status"] == "ok"] if "status" in rows else rows
    if figure not in ok:
        return ""
    found = run_interval(pd.to_numeric(ok[figure], errors="coerce"), ok["run_id"])
    if found is None:
        return ""
    if unit == "s":
        low, high = (human(value, "s") for value in found)
        return f" (95% {low.removesuffix(' s')}–{high})"
    text = gbps_text if unit == "GB/s" else (lambda value: f"{value:.3g}")
    return f" (95% {text(found[0])}–{text(found[1])})"


def setting_rows(mine: pd.DataFrame, setting: object) -> pd.DataFrame:
    """One machine's epoch rows of one setting."""
    return mine[(mine["workload"] == "mnist_epoch") & (mine["setting"] == setting)]


def case_rows(frame: pd.DataFrame, machine: object, case_id: object) -> pd.DataFrame:
    return frame[(frame["machine"] == machine) & (frame["case_id"] == case_id)]


def pm(spread: float) -> str:
    return f" ±{percent(spread)}" if isinstance(spread, float) and not math.isnan(spread) else ""


def of_peak(pct: object) -> str:
    """' (57% of peak)' from a percentage column; '' where the peak is unknown."""
    return (
        f" ({percent(float(pct) / 100)} of peak)"
        if isinstance(pct, (int, float)) and not pd.isna(pct)
        else ""
    )


def gbps_text(gbps: float) -> str:
    """3 significant digits, whole GB/s from 1000 up (4373, not 4.37e+03)."""
    return f"{gbps:.0f}" if abs(gbps) >= 1000 else f"{gbps:.3g}"


def bandwidth_cell(
    frame: pd.DataFrame, best: pd.Series, pct_column: str | None, pool: pd.Series | None = None
) -> str:
    """GB/s of the best case (the median of its builds) with their spread. Builds in two groups (of
    the best case, or of every case in `pool`: DRAM's sizes all read the same memory, so a machine
    whose memory has two modes is seen in both by every run) are said as two ranges, and the figure
    is the faster group's median: a bandwidth claims what the link or the memory delivers, and the
    slower group shared it with someone else (STREAM keeps its best pass for the same reason)."""
    gbps, groups = claimed_gbps(frame, best, pool)
    pct = best.get(pct_column) if pct_column else None
    pct = (
        pct * gbps / float(best["gbps"])
        if isinstance(pct, (int, float)) and not pd.isna(pct)
        else None
    )
    figure = f"{gbps_text(gbps)} GB/s{of_peak(pct)}"
    if groups is None:
        spread = interval_text(case_rows(frame, best["machine"], best["case_id"]), "gbps", "GB/s")
        return marked(figure + spread, best.get("flags"))
    (low, high) = (f"{gbps_text(group[0])}–{gbps_text(group[-1])}" for group in groups)
    return f"{figure}, the faster builds; builds in two groups: {low} and {high} GB/s"


def best_of(cases: pd.DataFrame, machine: str, mask: pd.Series, figure: str) -> pd.Series | None:
    return steady_best(cases[(cases["machine"] == machine) & mask].dropna(subset=[figure]), figure)


def declared_summary(
    cases: pd.DataFrame, machine: str, frame: pd.DataFrame | None = None
) -> dict[str, str]:
    """The summary rows workloads declare (SummaryFigure), for one machine: with the run-to-run
    interval from `frame` where given, else the builds' spread (the answer's ±)."""
    out: dict[str, str] = {}
    for name, spec in specs().items():
        for figure in spec.summary:
            if figure.figure not in cases or any(column not in cases for column in figure.where):
                continue
            mask = (cases["machine"] == machine) & (cases["workload"] == name)
            for column, value in figure.where.items():
                mask &= cases[column] == value
            rows = cases[mask].dropna(subset=[figure.figure])
            if figure.at_largest and not rows.empty:
                rows = rows[rows[figure.at_largest] == rows[figure.at_largest].max()]
            best = steady_best(rows, figure.figure)
            # a cell may have nothing to say here
            if best is not None and (cell := figure.cell(best.to_dict())):
                spread = (
                    pm(best["spread"])
                    if frame is None
                    else interval_text(case_rows(frame, machine, best["case_id"]), figure.figure)
                )
                out[figure.label] = marked(cell + spread, best.get("flags"))
    return out


def summary_rows(
    frame: pd.DataFrame,
    cases: pd.DataFrame,
    machine: str,
    baseline: str,
    energy_notes: dict[str, str],
    timings: dict[str, pd.DataFrame],
    left_out: pd.DataFrame,
) -> dict[str, str]:
    """The headline figures of one configuration with their spread, as display strings (Md where a
    setting is code). `left_out`: the rows with a figure past its bound, kept out of `frame` and
    `cases` but counted as flagged."""
    mine = frame[frame["machine"] == machine]
    out: dict[str, str] = {
        "runs · torch": f"{mine['run_id'].nunique()} · {mine['torch_version'].iloc[0]}"
    }
    for dtype in ("fp32", "tf32", "fp16", "bf16"):
        best = best_of(
            cases, machine, (cases["workload"] == "matmul") & (cases["dtype"] == dtype), "tflops"
        )
        if best is not None:
            spread = interval_text(case_rows(frame, machine, best["case_id"]), "tflops")
            out[f"matmul {dtype}, best"] = marked(
                f"{best['tflops']:.3g} TFLOP/s{of_peak(best.get('pct_of_peak'))}{spread}",
                best.get("flags"),
            )
    dram = best_of(
        cases,
        machine,
        (cases["workload"] == "elementwise") & (cases["memory_tier"] == "dram"),
        "gbps",
    )
    if dram is not None:
        dram_rows = (frame["workload"] == "elementwise") & (
            column_or(frame, "memory_tier", "") == "dram"
        )
        out["memory bandwidth (DRAM)"] = bandwidth_cell(frame, dram, "pct_of_peak_gbps", dram_rows)
    h2d = (
        (cases["workload"] == "transfer")
        & (cases["direction"] == "h2d")
        & (cases["pinned"] == True)  # noqa: E712
    )
    pinned = best_of(cases, machine, h2d, "gbps")
    if pinned is not None:
        out["host→device, pinned"] = bandwidth_cell(frame, pinned, None)
    epochs = epoch_table(mine)
    if not epochs.empty:
        if (t := template_row(epochs)) is not None:
            spread = interval_text(setting_rows(mine, t["setting"]), "epoch_s", "s")
            out["guide-template epoch"] = marked(
                f"{human(t['epoch_s'], 's')}{spread}, accuracy {t['test_accuracy']:.3f}", t["flags"]
            )
        best, _ = fastest_at_equal_accuracy(epochs)
        if best is not None:
            out["fastest epoch, equal accuracy"] = Md("{}{} {} ({:.3f}){}").format(
                human(best["epoch_s"], "s"),
                interval_text(setting_rows(mine, best["setting"]), "epoch_s", "s"),
                code(best["setting"]),
                best["test_accuracy"],
                f" ({BUSY_ONLY})" if busy_only(best["flags"]) else "",
            )
    for _, row in first_to_target(mine).iterrows():
        out[f"time to {row['target_accuracy']:g} accuracy"] = Md("{}{} {}{}{}").format(
            human(row["first_s"], "s"),
            seeds_range(row["first_seeds_s"]),
            code(row["first_design"]),
            f" ({BUSY_ONLY})" if row["first_busy"] else "",
            versus_template(row),
        )
    if not epochs.empty and "energy_j" in epochs:
        if (t := template_row(epochs.dropna(subset=["energy_j"]))) is not None:
            out["energy per template epoch"] = f"{t['energy_j']:.3g} J at {t['avg_power_w']:.3g} W"
    per_watt = (
        best_of(cases, machine, cases["workload"] == "matmul", "tflop_per_j")
        if "tflop_per_j" in cases
        else None
    )
    if per_watt is not None:
        out["matmul per watt, best"] = (
            f"{per_watt['tflop_per_j']:.3g} TFLOP/J ({per_watt['dtype']}, "
            f"{per_watt['avg_power_w']:.3g} W)"
        )
    notes = (
        sorted({energy_notes[f] for f in mine["source_file"].unique() if f in energy_notes})
        if "source_file" in mine
        else []
    )
    if not ("energy_j" in mine and mine["energy_j"].notna().any()) and notes:
        out["energy"] = "not measured: " + notes[0].split(" — ")[0]
    out.update(declared_summary(cases, machine, frame))
    if machine != baseline:
        pair = pair_timings(timings, baseline, machine)
        if (interval := speedup_interval(pair, baseline, machine)) is not None:
            out["speed vs baseline"] = interval.text()
    else:
        out["speed vs baseline"] = "baseline"
    flagged = int((mine[mine["status"] == "ok"]["flags"] != "").sum())
    flagged += int((left_out["machine"] == machine).sum())
    out["flagged · not ok rows"] = f"{flagged} · {int((mine['status'] != 'ok').sum())}"
    return out


def seeds_range(seconds: tuple[float, float]) -> str:
    """' (seeds 9.5–12.6 s)': the spread a time to target has from seed to seed, beside its olympic
    mean."""
    low, high = seconds
    if (
        not all(isinstance(value, float) and math.isfinite(value) for value in (low, high))
        or low == high
    ):
        return ""
    return f" (seeds {human(low, 's').removesuffix(' s')}–{human(high, 's')})"


def versus_template(row: pd.Series) -> str:
    """', template 34.7 s (3.06x)' where both ran under like conditions (both undisturbed, or both
    busy); a ratio of a quiet run and a busy one is the load's as much as the settings', so it is
    not printed."""
    if math.isnan(row["template_s"]):
        return ""
    template = f", template {human(row['template_s'], 's')}"
    if row["first_busy"] != row["template_busy"]:
        busy = "the template" if row["template_busy"] else "the first"
        return f"{template} (no ratio: {busy} ran beside other work, the other did not)"
    return f"{template} ({row['template_over_first']:.3g}x)"


# SUMMARY_ORDER's rows up to the host->device one: the micro-benchmarks; declared rows follow them
MICRO_ROWS = 8
SUMMARY_ORDER = (
    "runs · torch",
    "speed vs baseline",
    "matmul fp32, best",
    "matmul tf32, best",
    "matmul fp16, best",
    "matmul bf16, best",
    "memory bandwidth (DRAM)",
    "host→device, pinned",
    "guide-template epoch",
    "fastest epoch, equal accuracy",
    "energy per template epoch",
    "matmul per watt, best",
    "energy",
    "flagged · not ok rows",
)


def summary(
    frame: pd.DataFrame,
    cases: pd.DataFrame,
    baseline: str,
    energy_notes: dict[str, str],
    left_out: pd.DataFrame,
) -> pd.DataFrame:
    """Machines as columns (ranked by speed against the baseline), headline figures as rows;
    `left_out` as in summary_rows."""
    machines = by_speed(cases, list(frame["machine"].unique()), baseline)
    timings = timings_by_machine(frame)
    columns = {
        m: summary_rows(frame, cases, m, baseline, energy_notes, timings, left_out)
        for m in machines
    }
    seen = list(dict.fromkeys(key for rows in columns.values() for key in rows))
    # one per target accuracy, after the epoch figures
    targets = [key for key in seen if key.startswith("time to ")]
    known = [key for key in SUMMARY_ORDER if key in seen]
    at = (
        known.index("fastest epoch, equal accuracy") + 1
        if "fastest epoch, equal accuracy" in known
        else len(known)
    )
    order = known[:at] + targets + known[at:]
    micro = sum(key in SUMMARY_ORDER[:MICRO_ROWS] for key in order)
    # workloads' rows after micro
    order = order[:micro] + [key for key in seen if key not in order] + order[micro:]
    return pd.DataFrame(
        {m: [columns[m].get(k, "") for k in order] for m in machines},
        index=pd.Index(order, name="figure"),
    )


def left_out_lines(frame: pd.DataFrame, reasons: pd.Series) -> str:
    """One line per case whose rows the summary, the answer and the health verdicts leave out
    (`reasons`, per row: screen.left_out), with why; '' when none is."""
    rows = frame.loc[reasons.notna(), ["machine", "case_id"]].assign(why=reasons[reasons.notna()])
    if rows.empty:
        return ""
    lines = [
        Md(
            "Left out of this summary, the answer and the health verdicts (kept in the tables "
            "below, flagged `impossible`):"
        )
    ]
    for (machine, case_id), group in rows.groupby(["machine", "case_id"], sort=False):
        builds = f" ({len(group)} builds)" if len(group) > 1 else ""
        lines.append(
            Md("- {}, {}{}: left out — {}").format(
                machine, code(case_id), builds, group["why"].iloc[0]
            )
        )
    return "\n".join(lines)
