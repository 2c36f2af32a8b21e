"""Verdicts of a paired A/B session (`gpubench ab`): the same cases under two environments, build by
build in alternation on one machine. Build k of side A and build k of side B ran next to each
other, so the machine's drift hits both: the unit is the pair's log-ratio d_k = ln(B_k / A_k), and
the verdict is a paired t-test over the pairs (Student's t, n - 1 degrees of freedom) — the
variance that matters is the pairs' own, measured, not assumed.

On a shared machine a process now and then runs a case ~1.7x slower or faster (a thread placed
on a busy core): such a pair is an outlier, not a change. Pairs whose log-ratio lies beyond
OUTLIER_MADS scaled MADs of the case's median are set aside before the test (with 5 pairs or more;
the note says how many), so one bad process cannot hide a change or fake one.

Few pairs give few degrees of freedom, so a case's variance is moderated (limma's empirical
Bayes, Smyth 2004): it is pooled with the median variance of all cases' pairs, weighted as
PRIOR_DOF pairs' worth, and the t-test has PRIOR_DOF + n - 1 degrees of freedom. A case that is
noisier than the rest still widens its own interval through its own n - 1 degrees of freedom.

With many cases, some would cross ALPHA by chance: the cases' p-values are adjusted together
(Benjamini–Hochberg), so on unchanged code the chance that any case is called slower or faster
is at most ALPHA per session, whatever the number of cases.

A change that slows every case (a torch, driver or BIOS change) is judged on its own line: per
pair, the median log-ratio over the cases both sides ran; then the same t-test over the pairs.
Verdicts as in `compare`: slower / faster (p < ALPHA and beyond the threshold), no change (the
interval lies inside ± threshold), inconclusive (it does not: more pairs would tell), broken (ok
in A, failed or out of memory in B). Torch-free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats as sps

from reports.verdicts import ALPHA, Verdict, band_verdict

MACHINE_WIDE = "(every case: machine-wide shift)"
PRIOR_DOF = 4  # weight of the pooled variance, in pairs
OUTLIER_MADS = 3.0  # a pair this many scaled MADs from the case's median log-ratio is set aside
MIN_PAIRS_TO_REJECT = 5
MIN_CASES_TO_POOL = 5  # fewer cases: each case's own variance alone (plain paired t)


@dataclass(frozen=True)
class PairedSession:
    verdicts: list[Verdict]  # per case, then the machine-wide line last
    pairs: int  # complete pairs (builds both sides finished)
    notes: list[str]

    @property
    def exit_code(self) -> int:
        return 1 if any(v.verdict in ("slower", "broken") for v in self.verdicts) else 0

    @property
    def median_detectable(self) -> float | None:
        values = [v.detectable for v in self.verdicts if v.detectable is not None and v.case_id != MACHINE_WIDE]
        return float(np.median(values)) if values else None


def pair_logs(a: pd.DataFrame, b: pd.DataFrame) -> dict[str, pd.Series]:
    """case_id -> log(B/A) per build index, for the builds ok on both sides."""
    ok_a = a[a["status"] == "ok"].groupby(["case_id", "build"])["median_s"].median()
    ok_b = b[b["status"] == "ok"].groupby(["case_id", "build"])["median_s"].median()
    both = pd.concat({"a": ok_a, "b": ok_b}, axis=1).dropna()
    both = both[(both["a"] > 0) & (both["b"] > 0)]
    logs = np.log(both["b"] / both["a"])
    return {str(case): series.droplevel("case_id") for case, series in logs.groupby(level="case_id")}


def without_outliers(logs: np.ndarray) -> np.ndarray:
    """The pairs within OUTLIER_MADS scaled median absolute deviations of the median."""
    if logs.size < MIN_PAIRS_TO_REJECT:
        return logs
    center = float(np.median(logs))
    scale = 1.4826 * float(np.median(np.abs(logs - center)))
    if scale <= 0:
        return logs
    return logs[np.abs(logs - center) <= OUTLIER_MADS * scale]


def prior_of(logs: dict[str, pd.Series]) -> tuple[float, int] | None:
    """(pooled variance, its weight in pairs) for moderating each case's variance, or None."""
    variances = [float(np.var(kept, ddof=1)) for kept in (without_outliers(s.to_numpy()) for s in logs.values()) if kept.size >= 2]
    return (float(np.median(variances)), PRIOR_DOF) if len(variances) >= MIN_CASES_TO_POOL else None


def judge_logs(case_id: str, logs: np.ndarray, threshold: float, medians: tuple[float, float] = (math.nan, math.nan),
               prior: tuple[float, int] | None = None) -> Verdict:
    """A paired t-test over log-ratios (the variance moderated by `prior`), outlier pairs set
    aside; the interval and `detectable` at 1 - ALPHA."""
    aside = len(logs)
    logs = without_outliers(np.asarray(logs, float))
    aside -= len(logs)
    n = len(logs)
    mean = float(np.mean(logs)) if n else math.nan
    if n < 3:
        return Verdict(case_id, *medians, math.exp(mean) if n else math.nan, None, None, None, None, "inconclusive",
                       f"{n} pair(s): a paired verdict needs 3 or more")
    variance, dof = float(np.var(logs, ddof=1)), n - 1
    if prior is not None:
        variance, dof = (prior[1] * prior[0] + dof * variance) / (prior[1] + dof), prior[1] + dof
    se = math.sqrt(variance / n)
    t_crit = float(sps.t.ppf(1 - ALPHA / 2, dof))
    p_value = float(2 * sps.t.sf(abs(mean) / se, dof)) if se > 0 else (0.0 if mean else 1.0)
    ratio, low, high = math.exp(mean), math.exp(mean - t_crit * se), math.exp(mean + t_crit * se)
    detectable = math.exp(t_crit * se) - 1
    verdict = band_verdict(p_value, ratio, low, high, threshold)
    note = f"{n} pairs" + (f" ({aside} outlier pair(s) set aside)" if aside else "") + (f"; could detect >= {detectable:.0%}: more pairs would tell" if verdict == "inconclusive" else "")
    return Verdict(case_id, *medians, ratio, low, high, p_value, detectable, verdict, note)


def benjamini_hochberg(p_values: list[float]) -> list[float]:
    """Adjusted p-values (step-up, monotone), in the input order."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted, running = [0.0] * m, 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, p_values[i] * m / rank)
        adjusted[i] = running
    return adjusted


def adjusted(verdicts: list[Verdict], threshold: float) -> list[Verdict]:
    """The cases' verdicts from their p-values adjusted together (broken cases stay as they are)."""
    tested = [v for v in verdicts if v.p_value is not None]
    if len(tested) < 2:
        return verdicts
    by_case = dict(zip((v.case_id for v in tested), benjamini_hochberg([v.p_value for v in tested])))
    out = []
    for v in verdicts:
        if v.case_id not in by_case:
            out.append(v)
            continue
        p = by_case[v.case_id]
        verdict = band_verdict(p, v.ratio, v.ci_low, v.ci_high, threshold)
        note = v.note if verdict == v.verdict or verdict == "inconclusive" else v.note.split(";")[0]
        out.append(Verdict(v.case_id, v.base_median_s, v.new_median_s, v.ratio, v.ci_low, v.ci_high, p, v.detectable, verdict,
                           note + f"; p adjusted over {len(tested)} cases"))
    return out


def machine_wide(logs: dict[str, pd.Series], threshold: float) -> Verdict | None:
    """Per pair, the median log-ratio over the cases present in every pair; t-test over pairs."""
    table = pd.DataFrame(logs).dropna(axis=1)  # rows: build (pair), columns: cases present in all pairs
    if table.shape[1] < 2:
        return None
    verdict = judge_logs(MACHINE_WIDE, table.median(axis=1).to_numpy(), threshold)
    return Verdict(verdict.case_id, verdict.base_median_s, verdict.new_median_s, verdict.ratio, verdict.ci_low, verdict.ci_high,
                   verdict.p_value, verdict.detectable, verdict.verdict, f"median over {table.shape[1]} cases per pair; " + verdict.note)


def broken_cases(a: pd.DataFrame, b: pd.DataFrame) -> list[Verdict]:
    """ok in A, failed or out of memory in B (never ok there): a regression, whatever the timing."""
    ok_a, ok_b = set(a.loc[a["status"] == "ok", "case_id"]), set(b.loc[b["status"] == "ok", "case_id"])
    bad_b = b[b["status"].isin(["failed", "oom"])]
    verdicts = []
    for case_id in sorted((ok_a & set(bad_b["case_id"])) - ok_b):
        reason = str(bad_b.loc[bad_b["case_id"] == case_id, "reason"].iloc[0])
        verdicts.append(Verdict(case_id, math.nan, math.nan, math.nan, None, None, None, None, "broken", f"ok in A, {reason}"))
    return verdicts


def judge_session(a: pd.DataFrame, b: pd.DataFrame, threshold: float) -> PairedSession:
    logs = pair_logs(a, b)
    prior = prior_of(logs)
    verdicts = broken_cases(a, b)
    for case_id, series in sorted(logs.items()):
        medians = (float(a.loc[(a["case_id"] == case_id) & (a["status"] == "ok"), "median_s"].median()),
                   float(b.loc[(b["case_id"] == case_id) & (b["status"] == "ok"), "median_s"].median()))
        verdicts.append(judge_logs(case_id, series.to_numpy(), threshold, medians, prior))
    verdicts = adjusted(verdicts, threshold)
    shift = machine_wide(logs, threshold)
    notes = [] if shift is not None else ["machine-wide shift: not judged (fewer than 2 cases in every pair)"]
    pairs = max((len(s) for s in logs.values()), default=0)
    return PairedSession(verdicts + ([shift] if shift is not None else []), pairs, notes)


def format_session(session: PairedSession, threshold: float, sides: tuple[str, str] = ("A", "B")) -> str:
    a, b = sides
    lines = [f"| case | {a} median | {b} median | {b}/{a} | {1 - ALPHA:.0%} CI | p | detectable | verdict |",
             "|---|---:|---:|---:|---|---:|---:|---|"]
    for v in session.verdicts:
        ci = f"{v.ci_low:.3f}–{v.ci_high:.3f}" if v.ci_low is not None else "—"
        p = f"{v.p_value:.2g}" if v.p_value is not None else "—"
        detectable = f"{v.detectable:.1%}" if v.detectable is not None else "—"
        ratio = f"{v.ratio:.3f}" if not math.isnan(v.ratio) else "—"
        a_s = f"{v.base_median_s * 1e3:.4g} ms" if not math.isnan(v.base_median_s) else "—"
        b_s = f"{v.new_median_s * 1e3:.4g} ms" if not math.isnan(v.new_median_s) else "—"
        lines.append(f"| {v.case_id} | {a_s} | {b_s} | {ratio} | {ci} | {p} | {detectable} | {v.verdict} ({v.note}) |")
    counts = {k: sum(v.verdict == k for v in session.verdicts) for k in ("slower", "faster", "no change", "inconclusive", "broken")}
    detectable = session.median_detectable
    lines += ["", f"paired session: {session.pairs} pairs, threshold {threshold:.0%}, alpha {ALPHA}: " + ", ".join(f"{n} {k}" for k, n in counts.items())
              + (f"; median detectable change {detectable:.1%}" if detectable is not None else "")]
    return "\n".join(lines + session.notes)
