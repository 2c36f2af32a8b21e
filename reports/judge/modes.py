"""A memory that reads in two modes: this project's 2-core VM's DRAM reads 26-31 or 49-51 GB/s from
build to build, in one run as in another. Set side by side, the DRAM builds of both sides show the
two groups; a DRAM case whose sides sit in different groups changed mode, not code, and compare
cannot judge it (exit 6, never a false alarm)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from gpubench.reports.judge.aggregate import column_or
from gpubench.reports.judge.noise import MIN_BIMODAL_BUILDS, bimodal_cut, own_log_sd
from gpubench.reports.judge.verdicts import Judgement, Verdict

MOVED = (Judgement.SLOWER, Judgement.FASTER)


def dram_rows(rows: pd.DataFrame) -> pd.DataFrame:
    tier = column_or(rows, "memory_tier", "")
    dram = rows[(column_or(rows, "workload", "") == "elementwise") & (tier == "dram")]
    return dram[pd.to_numeric(column_or(dram, "gbps"), errors="coerce") > 0]


def dram_modes(base_ok: pd.DataFrame, new_ok: pd.DataFrame) -> tuple[float, float] | None:
    """(the slower group's top, the faster group's bottom) of both sides' DRAM builds in GB/s, where
    they fall in two groups far beyond their own samples (reports.judge.noise.bimodal_cut), else
    None."""
    rows = pd.concat([dram_rows(base_ok), dram_rows(new_ok)])
    if rows.empty:
        return None
    own = own_log_sd(rows) if {"rel_iqr", "rounds"} <= set(rows) else np.array([0.0])
    expected = float(np.median(own)) if np.isfinite(own).all() else 0.0
    values = np.sort(rows["gbps"].to_numpy(float))
    cut = bimodal_cut(np.log(values), expected)
    return None if cut is None else (float(values[cut - 1]), float(values[cut]))


def mode_changes(
    verdicts: list[Verdict], base_ok: pd.DataFrame, new_ok: pd.DataFrame
) -> tuple[list[Verdict], list[str]]:
    """The verdicts with each DRAM case whose sides read in different modes 'cannot judge: two
    modes', and a note."""
    bounds = dram_modes(base_ok, new_ok)
    if bounds is None:
        return verdicts, []
    low_top, high_bottom = bounds
    base, new = dram_rows(base_ok), dram_rows(new_ok)

    def mode(rows: pd.DataFrame, case_id: str) -> str | None:
        gbps = rows.loc[rows["case_id"] == case_id, "gbps"]
        median = float(gbps.median()) if not gbps.empty else float("nan")
        return "low" if median <= low_top else "high" if median >= high_bottom else None

    out, changed = [], 0
    for verdict in verdicts:
        sides = (mode(base, verdict.case_id), mode(new, verdict.case_id))
        if verdict.verdict in MOVED and None not in sides and sides[0] != sides[1]:
            verdict = replace(
                verdict,
                verdict=Judgement.TWO_MODES,
                note=f"BASE read the memory's {sides[0]} mode, NEW its {sides[1]} one",
            )
            changed += 1
        out.append(verdict)
    note = (
        f"{changed} DRAM case(s) cannot be judged: this machine's memory reads in two modes (up "
        f"to {low_top:.3g} and from {high_bottom:.3g} GB/s, in the builds of both sides) and the "
        "sides sit in different ones — rerun both sides, or compare the modes' shares over "
        "several runs"
    )
    return out, [note] if changed else []


def split_groups(
    frame: pd.DataFrame, best: pd.Series, figure: str, pool: pd.Series | None = None
) -> tuple[np.ndarray, np.ndarray] | None:
    """The builds of the best case (of every case in `pool`, where given: the sizes that read the
    same memory) in two groups, lower then higher (reports.judge.noise.bimodal: the gap most of
    the range and far beyond the builds' own samples), or None."""
    same = frame["case_id"] == best["case_id"] if pool is None else pool
    rows = frame[(frame["machine"] == best["machine"]) & same & (frame["status"] == "ok")]
    rows = rows[pd.to_numeric(rows[figure], errors="coerce") > 0]
    if len(rows) < MIN_BIMODAL_BUILDS:
        return None
    own = own_log_sd(rows) if {"rel_iqr", "rounds"} <= set(rows) else np.array([0.0])
    expected = float(np.median(own)) if np.isfinite(own).all() else 0.0
    values = np.sort(rows[figure].to_numpy(float))
    cut = bimodal_cut(np.log(values), expected)
    return None if cut is None else (values[:cut], values[cut:])


def claimed_gbps(
    frame: pd.DataFrame, best: pd.Series, pool: pd.Series | None = None
) -> tuple[float, tuple[np.ndarray, np.ndarray] | None]:
    """The GB/s a bandwidth claims of the best case, with its builds' two groups where they fall in
    two (split_groups): the faster group's median, what the link or the memory delivers (the slower
    group shared it with someone else; STREAM keeps its best pass for the same reason); else the
    best case's own figure."""
    groups = split_groups(frame, best, "gbps", pool)
    return (float(best["gbps"]) if groups is None else float(np.median(groups[1]))), groups
