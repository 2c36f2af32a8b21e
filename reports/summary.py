"""The report's one-screen summary: machines as columns, each headline figure with its spread as a row."""

from __future__ import annotations

import math

import pandas as pd

from gpubench.harness.catalog import specs
from gpubench.reports.aggregate import geomean
from gpubench.reports.intervals import pair_timings, speedup_interval, steady_best, timings_by_machine
from gpubench.reports.markdown import Md, code
from gpubench.reports.tables import TEMPLATE_SETTING, epoch_table, fastest_at_equal_accuracy, first_to_target
from gpubench.reports.units import human


def pm(spread: float) -> str:
    return f" ±{spread:.0%}" if isinstance(spread, float) and not math.isnan(spread) else ""


def best_of(cases: pd.DataFrame, machine: str, mask: pd.Series, figure: str) -> pd.Series | None:
    return steady_best(cases[(cases["machine"] == machine) & mask].dropna(subset=[figure]), figure)


def declared_summary(cases: pd.DataFrame, machine: str) -> dict[str, str]:
    """The summary rows workloads declare (SummaryFigure), for one machine."""
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
            if best is not None and (cell := figure.cell(best.to_dict())):  # a cell may have nothing to say here
                out[figure.label] = cell + pm(best["spread"])
    return out


def summary_rows(frame: pd.DataFrame, cases: pd.DataFrame, machine: str, baseline: str,
                 energy_notes: dict[str, str] | None = None,
                 timings: dict[str, pd.DataFrame] | None = None) -> dict[str, str]:
    """The headline figures of one configuration with their spread, as display strings (Md where a setting is code)."""
    mine = frame[frame["machine"] == machine]
    out: dict[str, str] = {"runs · torch": f"{mine['run_id'].nunique()} · {mine['torch_version'].iloc[0]}"}
    for dtype in ("fp32", "tf32", "fp16", "bf16"):
        best = best_of(cases, machine, (cases["workload"] == "matmul") & (cases["dtype"] == dtype), "tflops")
        if best is not None:
            pct = f" ({best['pct_of_peak']:.0f}% of peak)" if not pd.isna(best.get("pct_of_peak")) else ""
            out[f"matmul {dtype}, best"] = f"{best['tflops']:.3g} TFLOP/s{pct}{pm(best['spread'])}"
    dram = best_of(cases, machine, (cases["workload"] == "elementwise") & (cases["memory_tier"] == "dram"), "gbps")
    if dram is not None:
        pct = f" ({dram['pct_of_peak_gbps']:.0f}% of peak)" if not pd.isna(dram.get("pct_of_peak_gbps")) else ""
        out["memory bandwidth (DRAM)"] = f"{dram['gbps']:.3g} GB/s{pct}{pm(dram['spread'])}"
    h2d = (cases["workload"] == "transfer") & (cases["direction"] == "h2d") & (cases["pinned"] == True)  # noqa: E712
    pinned = best_of(cases, machine, h2d, "gbps")
    if pinned is not None:
        out["host→device, pinned"] = f"{pinned['gbps']:.3g} GB/s{pm(pinned['spread'])}"
    epochs = epoch_table(mine)
    if not epochs.empty:
        template = epochs[epochs["setting"] == TEMPLATE_SETTING]
        if not template.empty:
            t = template.iloc[0]
            out["guide-template epoch"] = (f"{human(t['epoch_s'], 's')}{pm(t['spread'])}, "
                                           f"accuracy {t['test_accuracy']:.3f}")
        best, _ = fastest_at_equal_accuracy(epochs)
        if best is not None:
            out["fastest epoch, equal accuracy"] = Md("{} {} ({:.3f})").format(
                human(best["epoch_s"], "s"), code(best["setting"]), best["test_accuracy"])
    for _, row in first_to_target(mine).iterrows():
        versus = (f", template {human(row['template_s'], 's')} ({row['template_over_first']:.3g}x)"
                  if not math.isnan(row["template_s"]) else "")
        out[f"time to {row['target_accuracy']:g} accuracy"] = Md("{} {}{}").format(
            human(row["first_s"], "s"), code(row["first_design"]), versus)
    if not epochs.empty and "energy_j" in epochs:
        template = epochs[epochs["setting"] == TEMPLATE_SETTING].dropna(subset=["energy_j"])
        if not template.empty:
            t = template.iloc[0]
            out["energy per template epoch"] = f"{t['energy_j']:.3g} J at {t['avg_power_w']:.3g} W"
    per_watt = best_of(cases, machine, cases["workload"] == "matmul", "tflop_per_j") if "tflop_per_j" in cases else None
    if per_watt is not None:
        out["matmul per watt, best"] = (f"{per_watt['tflop_per_j']:.3g} TFLOP/J ({per_watt['dtype']}, "
                                        f"{per_watt['avg_power_w']:.3g} W)")
    notes = (sorted({energy_notes[f] for f in mine["source_file"].unique() if f in energy_notes})
             if energy_notes and "source_file" in mine else [])
    if not ("energy_j" in mine and mine["energy_j"].notna().any()) and notes:
        out["energy"] = "not measured: " + notes[0].split(" — ")[0]
    out.update(declared_summary(cases, machine))
    if machine != baseline:
        pair = pair_timings(timings if timings is not None else timings_by_machine(frame), baseline, machine)
        if (interval := speedup_interval(pair, baseline, machine)) is not None:
            out["speed vs baseline"] = interval.text()
    else:
        out["speed vs baseline"] = "baseline"
    flagged = int((mine[mine["status"] == "ok"]["flags"] != "").sum())
    out["flagged · not ok rows"] = f"{flagged} · {int((mine['status'] != 'ok').sum())}"
    return out


MICRO_ROWS = 8  # SUMMARY_ORDER's rows up to the host->device one: the micro-benchmarks; declared rows follow them
SUMMARY_ORDER = ("runs · torch", "speed vs baseline", "matmul fp32, best", "matmul tf32, best", "matmul fp16, best",
                 "matmul bf16, best", "memory bandwidth (DRAM)", "host→device, pinned", "guide-template epoch",
                 "fastest epoch, equal accuracy", "energy per template epoch", "matmul per watt, best", "energy",
                 "flagged · not ok rows")


def summary(frame: pd.DataFrame, cases: pd.DataFrame, baseline: str,
            energy_notes: dict[str, str] | None = None) -> pd.DataFrame:
    """Machines as columns (ranked by speed against the baseline), headline figures as rows."""
    both = cases.pivot_table(index="case_id", columns="machine", values="median_s", aggfunc="median")

    def speed(machine: str) -> float:
        if machine == baseline or baseline not in both:
            return math.inf
        return geomean((both[baseline] / both[machine]).dropna()) if machine in both else 0.0  # no ok case: last

    machines = sorted(frame["machine"].unique(), key=lambda m: -speed(m))
    timings = timings_by_machine(frame)
    columns = {m: summary_rows(frame, cases, m, baseline, energy_notes, timings) for m in machines}
    seen = list(dict.fromkeys(key for rows in columns.values() for key in rows))
    targets = [key for key in seen if key.startswith("time to ")]  # one per target accuracy, after the epoch figures
    known = [key for key in SUMMARY_ORDER if key in seen]
    at = known.index("fastest epoch, equal accuracy") + 1 if "fastest epoch, equal accuracy" in known else len(known)
    order = known[:at] + targets + known[at:]
    micro = sum(key in SUMMARY_ORDER[:MICRO_ROWS] for key in order)
    order = order[:micro] + [key for key in seen if key not in order] + order[micro:]  # workloads' rows after micro
    return pd.DataFrame({m: [columns[m].get(k, "") for k in order] for m in machines},
                        index=pd.Index(order, name="figure"))
