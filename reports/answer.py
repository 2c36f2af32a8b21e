"""The report's first lines: the answer to the question it was run for (which machine, which setting
is fastest, by how much, how sure), and the banners that say which figures are not for comparison."""

from __future__ import annotations

import pandas as pd

from gpubench.reports.intervals import pair_timings, speedup_interval, timings_by_machine
from gpubench.reports.markdown import code, escape
from gpubench.reports.summary import best_of, declared_summary, pm
from gpubench.reports.tables import TEMPLATE_SETTING, epoch_table, fastest_at_equal_accuracy
from gpubench.reports.units import human


def fastest_machine(frame: pd.DataFrame, baseline: str) -> str:
    """The machine whose geomean speedup's lower bound is highest (one with fewer shared cases cannot win on a lucky
    interval); the baseline itself when none is faster."""
    timings = timings_by_machine(frame)
    best, best_low = baseline, 1.0
    for machine in (m for m in frame["machine"].unique() if m != baseline):
        interval = speedup_interval(pair_timings(timings, baseline, machine), baseline, machine)
        if interval is not None and interval.low > best_low:
            best, best_low = machine, interval.low
    return best


def machine_line(frame: pd.DataFrame, baseline: str) -> str:
    if frame["machine"].nunique() < 2:
        return ""
    winner = fastest_machine(frame, baseline)
    if winner == baseline:
        return (f"no configuration is surely faster than the baseline {escape(baseline)} "
                "(every speedup's 95% interval reaches 1x or below)")
    interval = speedup_interval(pair_timings(timings_by_machine(frame), baseline, winner), baseline, winner)
    return (f"**{escape(winner)}** is the fastest, {escape(interval.text())} against {escape(baseline)}"
            if interval else "")


def setting_line(frame: pd.DataFrame, cases: pd.DataFrame, machine: str) -> str:
    """The fastest epoch at the template's accuracy against the template; else the best matmul."""
    epochs = epoch_table(frame[frame["machine"] == machine])
    best, _ = fastest_at_equal_accuracy(epochs) if not epochs.empty else (None, None)
    if best is not None:
        template = epochs[epochs["setting"] == TEMPLATE_SETTING]
        versus = ""
        if not template.empty and best["setting"] != TEMPLATE_SETTING:
            t = template.iloc[0]
            versus = (f", {t['epoch_s'] / best['epoch_s']:.2g}x the guide template's "
                      f"{human(t['epoch_s'], 's')}{pm(t['spread'])}")
        return (f"its fastest training epoch at the template's accuracy is {code(best['setting'])}: "
                f"{human(best['epoch_s'], 's')}{pm(best['spread'])}, accuracy {best['test_accuracy']:.3f}{versus}")
    declared = [f"{label}: {cell}" for label, cell in declared_summary(cases, machine).items() if "fastest" in label]
    if declared:  # a --model run, a transformer run: the workload's own fastest figure
        return declared[0]
    matmul = best_of(cases, machine, cases["workload"] == "matmul", "tflops")
    if matmul is not None:
        return (f"its fastest matmul is {matmul['dtype']} at n={matmul['size']:.0f}: "
                f"{matmul['tflops']:.3g} TFLOP/s{pm(matmul['spread'])}")
    return ""


def answer(frame: pd.DataFrame, cases: pd.DataFrame, baseline: str) -> str:
    """One line: the fastest machine (with its interval) and its fastest setting (with its spread)."""
    if frame.empty:
        return ""
    winner = fastest_machine(frame, baseline) if frame["machine"].nunique() > 1 else str(frame["machine"].iloc[0])
    parts = [machine_line(frame, baseline), setting_line(frame, cases, winner)]
    if not parts[0] and parts[1]:
        parts[1] = f"on **{escape(winner)}**, " + (f"the {parts[1][4:]}" if parts[1].startswith("its ") else parts[1])
    text = "; ".join(p for p in parts if p)
    return f"**Answer:** {text}." if text else ""


def banners(frame: pd.DataFrame, smoke: pd.Series) -> list[str]:
    """Warnings a reader must see before any figure: smoke rows, and rows measured on a busy machine."""
    out = []
    if smoke.any():
        out.append(f"> **Smoke run: {int(smoke.sum())} row(s) of the smoke profile test the suite at tiny sizes — "
                   "their figures are not for comparison** (they appear in the workload tables only, never in the "
                   "summary or against a reference).")
    flags = frame.loc[frame["status"] == "ok", "flags"].astype(str).str.split(";")
    busy = int(flags.map(lambda f: "busy" in f or "busy-gpu" in f).sum())
    if busy:
        out.append(f"> **{busy} row(s) were measured while another process used the CPU (`busy`) or the GPU "
                   "(`busy-gpu`)**: they may read slow, and `gpubench compare` sets them aside.")
    return out
