"""Verdicts of a paired A/B session (`gpubench ab`): builds k of A and B ran next to each other on
one machine, so drift hits both and the unit is the pair's log-ratio ln(B_k / A_k). On a shared
machine a process now and then runs ~1.7x off (a thread on a busy core), so the test is Yuen's
paired trimmed-mean t (a plain paired t below 5 pairs), which keeps its error rate where dropping
outliers before a t-test does not. All p-values, the machine-wide line's (per pair, the median
log-ratio over common cases) included, are adjusted together (Benjamini–Hochberg), so on unchanged
code anything is called slower or faster about ALPHA per session (tests/test_power.py measures
it)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from gpubench.harness.core.exits import ExitCode, UsageError
from gpubench.harness.records.safe_files import read_json
from gpubench.reports.judge import sequential as sq
from gpubench.reports.judge.load import broken_rows

# 0.1%, not 0%
from gpubench.reports.judge.verdicts import (
    MACHINE_WIDE,
    Estimate,
    Judgement,
    Verdict,
    decide,
    exit_code_of,
    exp_capped,
    t_estimate,
)

# Yuen's usual trimming: one pair of 5–9 on each side
TRIM = 0.2
MIN_PAIRS_TO_TRIM = 5
# beyond +1000% a detectable change says only "far too noisy": printed as such
MAX_SHOWN_CHANGE = 10.0


@dataclass(frozen=True)
class PairedSession:
    # per case, then the machine-wide line last
    verdicts: list[Verdict]
    # complete pairs (builds both sides finished)
    pairs: int
    notes: list[str]
    # judged by the sequential rule: always-valid p and intervals
    sequential: bool = False

    @property
    def exit_code(self) -> int:
        """1 on a slowdown or a broken case; 2 when no case could be compared at all."""
        code = exit_code_of(self.verdicts)
        return code if code != ExitCode.OK or self.pairs else ExitCode.ERROR

    @property
    def median_detectable(self) -> float | None:
        values = [
            v.detectable
            for v in self.verdicts
            if v.detectable is not None and v.case_id != MACHINE_WIDE
        ]
        return float(np.median(values)) if values else None


def pair_logs(a: pd.DataFrame, b: pd.DataFrame) -> dict[str, pd.Series]:
    """case_id -> log(B/A) per build index, for the builds ok on both sides."""
    ok_a = a[a["status"] == "ok"].groupby(["case_id", "build"])["median_s"].median()
    ok_b = b[b["status"] == "ok"].groupby(["case_id", "build"])["median_s"].median()
    both = pd.concat({"a": ok_a, "b": ok_b}, axis=1).dropna()
    both = both[(both["a"] > 0) & (both["b"] > 0)]
    # rows: build, columns: case (not a group per case)
    table = np.log(both["b"] / both["a"]).unstack("case_id")
    return {str(case): series.dropna() for case, series in table.items()}


def yuen(logs: np.ndarray) -> tuple[float, float, int, int]:
    """(trimmed mean, its standard error, degrees of freedom, pairs trimmed) of paired
    log-ratios."""
    x = np.sort(np.asarray(logs, float))
    n = x.size
    g = math.floor(TRIM * n) if n >= MIN_PAIRS_TO_TRIM else 0
    h = n - 2 * g
    winsorized = np.clip(x, x[g], x[n - g - 1])
    se = math.sqrt((n - 1) * float(np.var(winsorized, ddof=1)) / (h * (h - 1)))
    return float(x[g : n - g].mean()), se, h - 1, 2 * g


def reach(change: float) -> str:
    return (
        f"{change:.0%} or more"
        if change <= MAX_SHOWN_CHANGE
        else f"only changes over {MAX_SHOWN_CHANGE:.0%}"
    )


def judge_logs(
    case_id: str,
    logs: np.ndarray,
    threshold: float,
    medians: tuple[float, float] = (math.nan, math.nan),
) -> Verdict:
    """Yuen's paired test over log-ratios; the interval and `detectable` at 1 - ALPHA
    (unadjusted)."""
    n = len(logs)
    if n < 3:
        mean = float(np.mean(logs)) if n else math.nan
        return Verdict(
            case_id,
            *medians,
            math.exp(mean) if n else math.nan,
            None,
            None,
            None,
            None,
            Judgement.INCONCLUSIVE,
            f"{n} pair(s): a paired verdict needs 3 or more",
        )
    mean, se, dof, trimmed = yuen(np.asarray(logs, float))
    estimate = t_estimate(mean, se, dof)
    verdict = decide(estimate, threshold)
    note = f"{n} pairs" + (f", {trimmed} trimmed" if trimmed else "")
    if verdict == Judgement.INCONCLUSIVE:
        note += f"; could detect {reach(estimate.detectable)}: more pairs would tell"
    return Verdict.of(case_id, medians, estimate, verdict, note)


def adjusted(verdicts: list[Verdict], threshold: float) -> list[Verdict]:
    """The cases' verdicts from their p-values adjusted together (broken cases stay as they are)."""
    tested = [v for v in verdicts if v.p_value is not None]
    if len(tested) < 2:
        return verdicts
    by_case = dict(
        zip(
            (v.case_id for v in tested),
            sq.bh_adjust(np.array([v.p_value for v in tested])).tolist(),
        )
    )
    out = []
    for v in verdicts:
        if v.case_id not in by_case:
            out.append(v)
            continue
        p = by_case[v.case_id]
        verdict = decide(Estimate(v.ratio, v.ci_low, v.ci_high, p, v.detectable), threshold)
        note = (
            v.note
            if verdict == v.verdict or verdict == Judgement.INCONCLUSIVE
            else v.note.split(";")[0]
        )
        out.append(
            replace(
                v, p_value=p, verdict=verdict, note=note + f"; p adjusted over {len(tested)} tests"
            )
        )
    return out


def machine_wide(logs: dict[str, pd.Series], threshold: float) -> Verdict | None:
    """Per pair, the median log-ratio over the cases present in every pair; t-test over pairs."""
    # rows: build (pair), columns: cases present in all pairs
    table = pd.DataFrame(logs).dropna(axis=1)
    if table.shape[1] < 2:
        return None
    verdict = judge_logs(MACHINE_WIDE, table.median(axis=1).to_numpy(), threshold)
    return replace(verdict, note=f"median over {table.shape[1]} cases per pair; " + verdict.note)


def broken_cases(a: pd.DataFrame, b: pd.DataFrame) -> list[Verdict]:
    """ok in A, never ok in B (failed, out of memory, skipped, stopped by its epoch cap): a
    regression, whatever the timing."""
    ok_a, ok_b = (
        set(a.loc[a["status"] == "ok", "case_id"]),
        set(b.loc[b["status"] == "ok", "case_id"]),
    )
    bad_b = broken_rows(b)
    verdicts = []
    for case_id in sorted((ok_a & set(bad_b["case_id"])) - ok_b):
        reason = str(bad_b.loc[bad_b["case_id"] == case_id, "reason"].iloc[0])
        verdicts.append(
            Verdict(
                case_id,
                math.nan,
                math.nan,
                math.nan,
                None,
                None,
                None,
                None,
                Judgement.BROKEN,
                f"ok in A, {reason}",
            )
        )
    return verdicts


def one_side_cases(a: pd.DataFrame, b: pd.DataFrame, sides: tuple[str, str]) -> list[str]:
    """Notes for the cases only one side ran (its selection differed): not judged, but named."""
    notes = []
    for name, mine, other in ((sides[0], a, b), (sides[1], b, a)):
        only = sorted(set(mine["case_id"]) - set(other["case_id"]))
        if only:
            shown = ", ".join(only[:5]) + (f" and {len(only) - 5} more" if len(only) > 5 else "")
            notes.append(
                f"only in {name}: {len(only)} case(s), not judged ({shown}) "
                "— the sides selected different cases"
            )
    return notes


def judge_session(
    a: pd.DataFrame,
    b: pd.DataFrame,
    threshold: float,
    sides: tuple[str, str] = ("A", "B"),
    sequential: bool = False,
) -> PairedSession:
    """The session's verdicts by the rule it was run under: its pairs judged once, or (`sequential`)
    looked at after every pair with each case stopped once decided (`gpubench ab --budget`)."""
    logs = pair_logs(a, b)
    # one grouping per side, not two masks per case
    medians_a, medians_b = ok_medians_s(a), ok_medians_s(b)
    medians = {
        case: (float(medians_a.get(case, math.nan)), float(medians_b.get(case, math.nan)))
        for case in logs
    }
    if sequential:
        verdicts = sequential_verdicts(logs, threshold, medians) if logs else []
    else:
        verdicts = [
            judge_logs(case, logs[case].to_numpy(), threshold, medians[case])
            for case in sorted(logs)
        ]
        shift = machine_wide(logs, threshold)
        verdicts = adjusted(verdicts + ([shift] if shift is not None else []), threshold)
    notes = (
        []
        if any(v.case_id == MACHINE_WIDE for v in verdicts)
        else [
            "machine-wide shift: not judged (fewer than 2 cases in "
            f"{'2 pairs' if sequential else 'every pair'})"
        ]
    )
    notes += one_side_cases(a, b, sides)
    if not logs:
        notes.append("no case was measured ok on both sides in any pair: nothing to compare")
    pairs = max((len(s) for s in logs.values()), default=0)
    return PairedSession(broken_cases(a, b) + verdicts, pairs, notes, sequential)


def sequential_verdicts(
    logs: dict[str, pd.Series], threshold: float, medians: dict[str, tuple[float, float]]
) -> list[Verdict]:
    """Each case's verdict by the sequential rule after all its pairs, and the machine-wide line's
    (per pair, the median over the 2+ cases that ran in it); the always-valid p-values are adjusted
    together."""
    series = dict(sorted(logs.items()))
    per_pair = pd.DataFrame(series).sort_index()
    counts = per_pair.notna().sum(axis=1)
    machine = per_pair.median(axis=1)[counts >= 2]
    if len(machine) >= 2:
        series[MACHINE_WIDE] = machine
    last = {case: sq.prefixes(values.sort_index().to_numpy()) for case, values in series.items()}
    p_values = sq.bh_adjust(np.array([stats.p_value[-1] for stats in last.values()]))
    verdicts = []
    for (case_id, stats), p_value in zip(last.items(), p_values):
        mean, half, n = float(stats.mean[-1]), float(stats.half_width[-1]), len(stats.mean)
        low, high = (
            (exp_capped(mean - half), exp_capped(mean + half))
            if math.isfinite(half)
            else (None, None)
        )
        detectable = sq.detectable(half) if math.isfinite(half) else None
        verdict = decide(
            Estimate(
                exp_capped(mean),
                low or 0.0,
                math.inf if high is None else high,
                float(p_value),
                math.inf if detectable is None else detectable,
            ),
            threshold,
        )
        could = (
            f": could detect {reach(detectable)}"
            if detectable is not None
            else f": no verdict is possible before {sq.first_decidable_pairs()} pairs"
        )
        note = (
            f"decided after {n} pairs"
            if verdict != Judgement.INCONCLUSIVE
            else f"undecided after {n} pairs{could}"
        )
        if case_id == MACHINE_WIDE:
            note = f"median over the cases of each pair, {n} pairs; " + note
        base_s, new_s = medians.get(case_id, (math.nan, math.nan))
        verdicts.append(
            Verdict(
                case_id,
                base_s,
                new_s,
                exp_capped(mean),
                low,
                high,
                float(p_value),
                detectable,
                verdict,
                note,
            )
        )
    return verdicts


def ok_medians_s(frame: pd.DataFrame) -> pd.Series:
    """case_id -> the median of its ok rows' median_s."""
    return frame[frame["status"] == "ok"].groupby("case_id")["median_s"].median()


def undecided_cases(session: PairedSession) -> list[str]:
    """The cases a sequential session would give more pairs: measured on both sides, not yet
    decided."""
    return [
        v.case_id
        for v in session.verdicts
        if v.verdict == Judgement.INCONCLUSIVE and v.case_id != MACHINE_WIDE
    ]


def paired_sides(base: Path, new: Path) -> tuple[str, str] | None:
    """("A", "B") when BASE and NEW are the A and B files of one `gpubench ab` session (its
    `<session>.ab.json` beside them), ("B", "A") the other way round, else None. A symlink to a
    side's file is that side."""
    base, new = base.resolve(), new.resolve()
    if base.suffix != ".csv" or base.parent != new.parent:
        return None
    for first, second in (("A", "B"), ("B", "A")):
        session = base.stem[:-2]
        if (
            base.stem.endswith(f"-{first}")
            and new.name == f"{session}-{second}.csv"
            and (base.parent / f"{session}.ab.json").is_file()
        ):
            return first, second
    return None


# a session's marker is a few hundred bytes
MARKER_MAX_BYTES = 1 << 20


def judged_sequentially(base: Path) -> bool:
    """Whether BASE's session looked after every pair (marker "design": "sequential"): a fixed-pairs
    test would read its early stops as too much evidence."""
    base = base.resolve()
    marker = base.parent / f"{base.stem[:-2]}.ab.json"
    try:
        payload = read_json(marker, MARKER_MAX_BYTES, "session marker")
    except (OSError, ValueError) as error:
        why = getattr(error, "strerror", None) or error
        raise UsageError(
            f"cannot read {marker} ({why}): it says how the session chose its pairs — read it as "
            "the session's owner, or pass copies of the CSVs under other names"
        ) from None
    return isinstance(payload, dict) and payload.get("design") == "sequential"


def pairing_defect(a: pd.DataFrame, b: pd.DataFrame) -> str | None:
    """Why two files named as a session's sides cannot be judged paired: more than one machine, or
    builds that did not alternate (every row of build k no later than any of build k + 1; a side
    copied from another session)."""
    machines = sorted(set(a["machine_id"]) | set(b["machine_id"]))
    if len(machines) > 1:
        return (
            f"they hold {len(machines)} machines ({', '.join(machines)}), and a pair is two "
            "builds on one machine"
        )
    stamps = pd.concat([a[["build", "timestamp_utc"]], b[["build", "timestamp_utc"]]])
    times = pd.to_datetime(stamps["timestamp_utc"], utc=True, format="ISO8601", errors="coerce")
    spans = times.groupby(stamps["build"]).agg(["min", "max"]).sort_index()
    late = spans["max"].iloc[:-1].to_numpy() > spans["min"].iloc[1:].to_numpy()
    if late.any():
        build = int(spans.index[int(np.argmax(late))])
        return (
            f"their builds did not alternate (a row of build {build + 1} was written after one of "
            f"build {build + 2})"
        )
    return None
