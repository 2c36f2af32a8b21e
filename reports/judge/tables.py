"""Pure table-building over the merged frame: what the report says, without rendering (the tables
the judge builds; gpubench.reports.render draws them)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from gpubench.harness.core.exits import UsageError
from gpubench.harness.core.peaks import PEAKS, peak_tflops
from gpubench.harness.core.duration_text import format_duration
from gpubench.reports.judge.aggregate import column_or, geomean, per_case, union_flags
from gpubench.reports.judge.intervals import (
    pair_timings,
    speedup_interval,
    steady_best,
    timings_by_machine,
)
from gpubench.reports.judge.settled import busy_flagged

TEMPLATE_SETTING = "guide-template"
# a duration a build measured and wrote into its reason
MEASURED = r"\d+(?:\.\d+)?(?:e[+-]?\d+)? ms"
# "fastest" means fastest among settings within this of the template's accuracy
EQUAL_ACCURACY = 0.01


def ok_rows(frame: pd.DataFrame, workload: str) -> pd.DataFrame:
    return frame[(frame["workload"] == workload) & (frame["status"] == "ok")]


def matmul_peak_table(cases: pd.DataFrame) -> pd.DataFrame:
    """Best TFLOP/s each machine reached per dtype (over the cases), against the datasheet peak
    where known."""
    rows = cases[cases["workload"] == "matmul"].dropna(subset=["tflops", "dtype", "size"])
    if rows.empty:
        return pd.DataFrame()
    best = pd.DataFrame(
        [steady_best(group, "tflops") for _, group in rows.groupby(["machine", "dtype"])]
    )
    out = best[["machine", "dtype", "size", "tflops", "builds", "spread"]].copy()
    out["peak_tflops"] = [
        peak_tflops(str(name), str(dtype))
        for name, dtype in zip(best["device_name"], best["dtype"])
    ]
    out["pct_of_peak"] = 100 * out["tflops"] / out["peak_tflops"]
    return out.reset_index(drop=True)


def baseline_machine(frame: pd.DataFrame, baseline: str | None) -> str:
    """The machine others are compared with: named by machine_id or hostname, else the first."""
    if baseline is None:
        return str(frame["machine"].iloc[0])
    match = frame[(frame["machine_id"] == baseline) | (frame["hostname"] == baseline)]
    if match.empty:
        known = ", ".join(sorted(set(frame["machine_id"]) | set(frame["hostname"])))
        raise UsageError(
            f"--baseline {baseline!r} matches no machine_id or hostname in the results (known: "
            f"{known})"
        )
    return str(match["machine"].iloc[0])


def speedups(frame: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Per workload and machine: geomean speedup (baseline median / machine median) over the ok
    cases both ran."""
    ok = (
        frame[frame["status"] == "ok"]
        .groupby(["workload", "case_id", "machine"])["median_s"]
        .median()
    )
    ok = ok.unstack("machine")
    if baseline not in ok:
        return pd.DataFrame()
    records, timings = [], timings_by_machine(frame)
    for machine in [m for m in ok.columns if m != baseline]:
        ratios = (ok[baseline] / ok[machine]).dropna()
        pair = pair_timings(timings, baseline, machine)
        for workload, values in ratios.groupby(level="workload"):
            interval = speedup_interval(pair, baseline, machine, str(workload))
            records.append(
                {
                    "workload": workload,
                    "machine": machine,
                    "cases": len(values),
                    "geomean_speedup": geomean(values),
                    "ci95_low": interval.low if interval else math.nan,
                    "ci95_high": interval.high if interval else math.nan,
                    "min": float(values.min()),
                    "max": float(values.max()),
                }
            )
    return pd.DataFrame(records)


def spread_between(values: pd.Series) -> float:
    """IQR/median of one figure over builds and runs (the report's `±`); NaN from a single one."""
    values = values.dropna()
    if len(values) < 2:
        return math.nan
    return float((values.quantile(0.75) - values.quantile(0.25)) / values.median())


def epoch_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per machine and setting: medians over builds and runs, `spread` between the builds' epochs
    (the report's `±`), `windows_spread` of the step windows inside one epoch, flags."""
    rows = ok_rows(frame, "mnist_epoch")
    if rows.empty:
        return pd.DataFrame()
    grouped = rows.groupby(["machine", "setting"], sort=False)
    medians = (
        "epoch_s",
        "rel_iqr",
        "samples_per_s",
        "data_wait_frac",
        "test_accuracy",
        "peak_mem_bytes",
        "compile_s",
        "energy_j",
        "avg_power_w",
    )
    spec = {{"rel_iqr": "windows_spread"}.get(c, c): (c, "median") for c in medians if c in rows}
    out = grouped.agg(
        dataset=("dataset", "first"),
        **spec,
        spread=("epoch_s", spread_between),
        epochs=("epoch_s", "size"),
        flags=("flags", union_flags),
    )
    return out.reset_index().sort_values(["machine", "epoch_s"]).reset_index(drop=True)


def template_row(epochs: pd.DataFrame) -> pd.Series | None:
    """The guide template's (first) row, None where it did not run."""
    template = epochs[epochs["setting"] == TEMPLATE_SETTING]
    return template.iloc[0] if not template.empty else None


def fastest_at_equal_accuracy(epochs: pd.DataFrame) -> tuple[pd.Series | None, pd.DataFrame]:
    """Among one machine's epoch rows: the fastest setting within EQUAL_ACCURACY of the template's
    accuracy (any without a template or on synthetic data), and the settings that were faster but
    less accurate."""
    if epochs.empty:
        return None, epochs
    template = template_row(epochs)
    if (
        template is None
        or (epochs["dataset"] == "synthetic").any()
        or pd.isna(template["test_accuracy"])
    ):
        return epochs.loc[epochs["epoch_s"].idxmin()], epochs.iloc[0:0]
    floor = float(template["test_accuracy"]) - EQUAL_ACCURACY
    equal = epochs[epochs["test_accuracy"] >= floor]
    best = equal.loc[equal["epoch_s"].idxmin()]
    return best, epochs[(epochs["test_accuracy"] < floor) & (epochs["epoch_s"] < best["epoch_s"])]


def template_vs_fastest(frame: pd.DataFrame) -> pd.DataFrame:
    """Per machine: the guide template's epoch time over the fastest setting at equal accuracy."""
    table = epoch_table(frame)
    # every epoch row failed: no machine to set against its template
    if table.empty:
        return pd.DataFrame()
    records = []
    for machine, group in table.groupby("machine", sort=False):
        best, less = fastest_at_equal_accuracy(group)
        t = template_row(group)
        template_s, template_accuracy = (
            (float(t["epoch_s"]), float(t["test_accuracy"]))
            if t is not None
            else (math.nan, math.nan)
        )
        records.append(
            {
                "machine": machine,
                "template_epoch_s": template_s,
                "template_accuracy": template_accuracy,
                "fastest_setting": best["setting"],
                "fastest_epoch_s": float(best["epoch_s"]),
                "fastest_accuracy": float(best["test_accuracy"]),
                "template_over_fastest": template_s / float(best["epoch_s"]),
                "faster_but_less_accurate": ", ".join(
                    f"{s} ({a:.3f})" for s, a in zip(less["setting"], less["test_accuracy"])
                ),
            }
        )
    return pd.DataFrame(records)


def olympic_mean(times_s: list[float]) -> float:
    """MLPerf's score over seeds: drop the fastest and the slowest, mean of the rest (plain mean
    below three seeds). A seed that did not converge is inf: a second one leaves an inf in the mean
    (the result is invalid)."""
    kept = sorted(times_s)[1:-1] if len(times_s) >= 3 else sorted(times_s)
    return float(np.mean(kept)) if kept else math.nan


def _summary_of(rows: pd.DataFrame, column: str, how: str = "median") -> float:
    """median/min/max of a column over rows, NaN when there are none (no converged seed)."""
    return float(getattr(rows[column], how)()) if len(rows) and column in rows else math.nan


def stopped_by_budget(rows: pd.DataFrame) -> pd.Series:
    """Unreached rows a run budget stopped (not their epoch cap): no evidence the seed would not
    converge."""
    return (rows["status"] == "unreached") & (column_or(rows, "stopped_by", "") == "budget")


def unreached_seeds(rows: pd.DataFrame) -> str:
    """What each unreached seed measured, as a reader says it: '83.2% in 2m36s (budget)'; never a
    time to target."""
    unreached = rows[rows["status"] == "unreached"]
    empty = pd.Series(None, index=unreached.index, dtype=object)
    accuracy, seconds, by = (
        unreached[c] if c in unreached else empty
        for c in ("test_accuracy", "training_s", "stopped_by")
    )
    return ", ".join(
        f"{100 * float(a):.3g}% in {format_duration(float(s))} "
        f"({b if isinstance(b, str) else 'stopped'})"
        for a, s, b in zip(accuracy, seconds, by)
        if pd.notna(a) and pd.notna(s)
    )


def target_verdict(valid: bool, missed: int, budget_stopped: int, seeds: int) -> str:
    if valid:
        return "valid"
    if budget_stopped:
        return (
            f"invalid: {missed} of {seeds} seeds without a time to target, {budget_stopped} "
            "stopped by the run budget — raise --budget"
        )
    return f"invalid: {missed} of {seeds} seeds did not converge"


def time_to_accuracy_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Per machine, design and target: seeds, how many did not converge, the olympic mean time to
    target, the converged seeds' spread, epochs and energy. Valid with at most one seed without a
    time to target (MLPerf): one that did not converge, diverged, or was stopped before it
    (`unreached`, by its epoch cap or its budget share; what it reached is shown apart, never as a
    time)."""
    statuses = ["ok", "unreached", "failed", "oom"]
    rows = frame[(frame["workload"] == "time_to_accuracy") & frame["status"].isin(statuses)].copy()
    if rows.empty:
        return pd.DataFrame()
    # a seed that crashed before its target was resolved still counts, as not converged, for its
    # design's target
    known = (
        rows.dropna(subset=["target_accuracy"])
        .groupby(["machine", "design"])["target_accuracy"]
        .first()
    )
    missing = rows["target_accuracy"].isna()
    rows.loc[missing, "target_accuracy"] = [
        known.get((m, d), math.nan)
        for m, d in zip(rows.loc[missing, "machine"], rows.loc[missing, "design"])
    ]
    records = []
    for (machine, design, target), group in rows.groupby(
        ["machine", "design", "target_accuracy"], sort=False, dropna=False
    ):
        ok = group[group["status"] == "ok"]
        missed, budget_stopped = len(group) - len(ok), int(stopped_by_budget(group).sum())
        score_s = olympic_mean(list(ok["time_to_target_s"]) + [math.inf] * missed)
        valid = math.isfinite(score_s) and missed <= 1
        records.append(
            {
                "machine": machine,
                "design": design,
                "target_accuracy": target,
                "seeds": len(group),
                "not_converged": missed - budget_stopped,
                "stopped_by_budget": budget_stopped,
                "olympic_mean_s": score_s if valid else math.nan,
                "fastest_seed_s": _summary_of(ok, "time_to_target_s", "min"),
                "slowest_seed_s": _summary_of(ok, "time_to_target_s", "max"),
                "epochs_to_target": _summary_of(ok, "epochs_to_target"),
                "test_accuracy": _summary_of(ok, "test_accuracy"),
                "energy_to_target_j": _summary_of(ok, "energy_to_target_j"),
                "compile_s": _summary_of(ok, "compile_s"),
                "unreached": unreached_seeds(group),
                "busy_only": bool(len(ok)) and bool(busy_flagged(ok).all()),
                "verdict": target_verdict(valid, missed, budget_stopped, len(group)),
            }
        )
    return (
        pd.DataFrame(records)
        .sort_values(["machine", "target_accuracy", "olympic_mean_s"])
        .reset_index(drop=True)
    )


def first_to_target(frame: pd.DataFrame) -> pd.DataFrame:
    """Per machine and target: the design that reaches it first (lowest valid olympic mean) against
    the template."""
    table = time_to_accuracy_table(frame)
    records = []
    groups = table.groupby(["machine", "target_accuracy"], sort=False) if not table.empty else ()
    for (machine, target), group in groups:
        valid = group.dropna(subset=["olympic_mean_s"])
        if valid.empty:
            continue
        best = valid.loc[valid["olympic_mean_s"].idxmin()]
        template = group[group["design"] == "template"]
        template_s = float(template["olympic_mean_s"].iloc[0]) if not template.empty else math.nan
        records.append(
            {
                "machine": machine,
                "target_accuracy": target,
                "first_design": best["design"],
                "first_s": float(best["olympic_mean_s"]),
                "first_busy": bool(best["busy_only"]),
                "first_seeds_s": (best["fastest_seed_s"], best["slowest_seed_s"]),
                "template_busy": bool(template["busy_only"].iloc[0])
                if not template.empty
                else False,
                "template_s": template_s,
                "template_over_first": template_s / float(best["olympic_mean_s"]),
                "first_energy_j": best["energy_to_target_j"],
                "template_energy_j": float(template["energy_to_target_j"].iloc[0])
                if not template.empty
                else math.nan,
            }
        )
    return pd.DataFrame(records)


def flagged(frame: pd.DataFrame) -> pd.DataFrame:
    """Ok rows whose figure carries a flag: per machine and workload, each flag with how many builds
    and which cases."""
    ok = frame[(frame["status"] == "ok") & (frame["flags"] != "")]
    records = [
        {"machine": m, "workload": w, "flag": flag, "case_id": c}
        for m, w, c, flags in zip(ok["machine"], ok["workload"], ok["case_id"], ok["flags"])
        for flag in str(flags).split(";")
        if flag
    ]
    if not records:
        return pd.DataFrame()
    per_flag = (
        pd.DataFrame(records)
        .groupby(["machine", "workload", "flag"], sort=False)
        .agg(
            builds=("case_id", "size"),
            cases=("case_id", lambda c: ", ".join(sorted({x.split("/", 1)[-1] for x in c}))),
        )
        .reset_index()
    )
    # a row per machine and workload: 'noisy: 4 builds (add-fp32-2^20, …); cache: 6 builds (…)'
    per_flag["flags"] = [
        f"{flag}: {builds} build{'s' if builds != 1 else ''} ({cases})"
        for flag, builds, cases in zip(per_flag["flag"], per_flag["builds"], per_flag["cases"])
    ]
    return (
        per_flag.groupby(["machine", "workload"], sort=False)["flags"].agg("; ".join).reset_index()
    )


# like for like: a grad mode is set against the others here
INFERENCE_GROUP = ("model", "batch_size", "dtype")


def fastest_grad_modes(rows: pd.DataFrame) -> dict[str, list[str]]:
    """Per grad mode, the (model, batch) groups where its median samples/s over builds (the
    Inference table's figure) is the highest: each group is judged on its own rows, never on a
    median pooled over groups."""
    if rows.empty or not {"samples_per_s", "grad_mode"} <= set(rows.columns):
        return {}
    cases = per_case(rows).dropna(subset=["samples_per_s", "grad_mode"])
    keys = [c for c in INFERENCE_GROUP if c in cases and cases[c].notna().any()]
    winners: dict[str, list[str]] = {}
    for values, group in cases.groupby(keys, sort=False, dropna=False):
        if group["grad_mode"].nunique() < 2:
            continue
        named = dict(zip(keys, values if isinstance(values, tuple) else (values,)))
        label = " ".join(
            f"bs{v:.0f}" if k == "batch_size" else str(v) for k, v in named.items() if pd.notna(v)
        )
        winners.setdefault(str(group.loc[group["samples_per_s"].idxmax(), "grad_mode"]), []).append(
            label
        )
    return winners


COMPILE_FIGURES = ["compile_s", "eager_step_s", "compiled_step_s", "gain_pct", "break_even_steps"]


def compile_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Compiled cases per machine and setting (medians over runs). The compiled step is derived per
    row, so `step_s` (with data fetching) is not mixed in; a run that never breaks even counts as
    infinitely many steps."""
    rows = ok_rows(frame, "mnist_epoch").dropna(subset=["compile_s", "eager_step_s"]).copy()
    rows["compiled_step_s"] = rows["eager_step_s"] - rows["compile_s"] / rows["break_even_steps"]
    rows["gain_pct"] = 100 * (rows["eager_step_s"] - rows["compiled_step_s"]) / rows["eager_step_s"]
    rows["break_even_steps"] = rows["break_even_steps"].fillna(math.inf)
    keys = ["machine", "setting", "compile_mode"]
    folded = rows.groupby(keys, sort=False, dropna=False)[COMPILE_FIGURES].median().reset_index()
    folded["break_even_steps"] = folded["break_even_steps"].map(
        lambda v: "never" if math.isinf(v) else f"{v:.0f}"
    )
    return folded[keys + COMPILE_FIGURES]


def peaks_table() -> pd.DataFrame:
    """The datasheet peaks gpubench knows (dense TFLOP/s; memory GB/s)."""
    return pd.DataFrame(
        [
            {
                "device": name,
                **{f"{k}_tflops": v for k, v in peak.tflops.items()},
                "mem_gbps": peak.mem_gbps,
            }
            for name, peak in PEAKS
        ]
    )


def not_ok_grouped(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows not ok, grouped by machine, workload, status and reason, with counts and the cases."""
    bad = frame[frame["status"] != "ok"]
    if bad.empty:
        return pd.DataFrame()
    # reasons that differ only in what each build measured (the fp16 skip's matmul times) are one
    # reason
    bad = bad.assign(_key=bad["reason"].astype(str).str.replace(MEASURED, "#", regex=True))
    grouped = bad.groupby(["machine", "workload", "status", "_key"], sort=False)
    out = grouped.agg(
        rows=("case_id", "size"),
        reason=("reason", "first"),
        cases=(
            "setting",
            lambda s: ", ".join(sorted(set(s))[:6]) + (" …" if s.nunique() > 6 else ""),
        ),
    )
    return out.reset_index()[["machine", "workload", "status", "rows", "reason", "cases"]]


# of the builds that ran
SELFCHECK_WORST_FIRST = ("failed", "inconclusive", "ok")


def selfcheck_word(outcomes: pd.Series) -> str:
    """A size's self-check in one word: the worst outcome of the builds that ran; where none ran,
    what stopped them (`skipped`, `oom`): such a size says nothing of the clocks, and must not read
    as a pass."""
    for outcome in SELFCHECK_WORST_FIRST:
        if (outcomes == outcome).any():
            return outcome
    return str(outcomes.iloc[0])


def selfcheck_outcomes(checks: pd.DataFrame) -> pd.Series:
    """Per row: its status, an ok row the check could not decide (its reason says so) as
    `inconclusive`."""
    unclear = (checks["status"] == "ok") & checks["reason"].astype(str).str.contains(
        "selfcheck inconclusive"
    )
    return checks["status"].mask(unclear, "inconclusive")
