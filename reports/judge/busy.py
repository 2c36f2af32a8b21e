"""Rows flagged busy in an unpaired comparison (docs/method.md, "How compare decides"). Another
process on the machine makes a case read slower, never faster. So a busy side widens a case's noise
rather than erasing its verdict, and the direction of a difference decides what it can mean: a
slowdown against a busy BASE, or a speedup against a busy NEW, was measured against a side that read
slow and is if anything understated, so it is judged; a slowdown with NEW busy, or a speedup with
BASE busy, is what the load alone could have made: "cannot judge: busy" (exit 6), neither a pass
nor, on its own, a failure. With both sides busy every significant difference is of that kind."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

import pandas as pd

from gpubench.harness.core.flags import BUSY_FLAGS
from gpubench.reports.judge.verdicts import MACHINE_WIDE, Judgement, Verdict

# Added per busy run to the relative noise of a case's ratio. A build on a core another process
# shares runs ~1.7x slower now and then, and neither the case's own spread nor the quiet cases'
# scatter (robust: a case that jumped is left out of it) sees that. Not a measured figure: chosen so
# a 2x change stays decidable from one run per side, even for a case built once per run (a user's
# own test), while one under ~50% wants quiet runs; the audit on a busy machine
# (docs/validation/compare-power.md) is where it is checked.
BUSY_NOISE = 0.15
# A judgement busy rows could make by themselves: the side whose busy rows could have, and how
LOAD_ALONE = {
    Judgement.SLOWER: ("NEW", "the load alone reads slower"),
    Judgement.FASTER: ("BASE", "the load alone makes NEW read faster"),
}
# A judgement a busy side can only make smaller: the side, and what is understated
UNDERSTATED = {Judgement.SLOWER: ("BASE", "slowdown"), Judgement.FASTER: ("NEW", "speedup")}


@dataclass(frozen=True)
class Busy:
    """One case's (or the whole comparison's) busy rows: per side, its runs and how many of them had
    a busy row."""

    base_runs: int
    base_busy_runs: int
    new_runs: int
    new_busy_runs: int
    base_flags: tuple[str, ...] = ()
    new_flags: tuple[str, ...] = ()

    def side(self, name: str) -> tuple[str, ...]:
        """The busy flags of side 'BASE' or 'NEW' (empty when quiet)."""
        return self.base_flags if name == "BASE" else self.new_flags

    @property
    def variance(self) -> float:
        """What the busy runs add to the variance of the log-ratio: BUSY_NOISE² per busy run,
        through the mean of each side's runs."""
        return BUSY_NOISE**2 * (
            self.base_busy_runs / max(1, self.base_runs) ** 2
            + self.new_busy_runs / max(1, self.new_runs) ** 2
        )

    def why(self, name: str) -> str:
        return f"{name} rows flagged " + " and ".join(self.side(name))


def busy_rows(rows: pd.DataFrame) -> pd.Series:
    """Per row: its busy flags, ';'-joined ('' when none)."""
    if "flags" not in rows:
        return pd.Series("", index=rows.index, dtype=object)
    cells = rows["flags"].fillna("").astype(str)
    return cells.map(
        lambda cell: ";".join(sorted({flag_name(f) for f in cell.split(";")} & BUSY_FLAGS))
    )


def flag_name(flag: str) -> str:
    """A flag's name without what it may carry after it ('busy (48% of the CPU)' -> 'busy')."""
    found = re.match(r"[a-z-]+", flag.strip())
    return found.group(0) if found else ""


def side_counts(rows: pd.DataFrame, key: pd.Series) -> pd.DataFrame:
    """Per key (a case, or one key for the whole side): runs, runs with a busy row, and the busy
    flags seen."""
    flags = busy_rows(rows)
    frame = pd.DataFrame({"key": key, "run_id": rows["run_id"], "flags": flags})
    busy = frame[frame["flags"] != ""]
    return pd.DataFrame(
        {
            "runs": frame.groupby("key")["run_id"].nunique(),
            "busy_runs": busy.groupby("key")["run_id"].nunique(),
            "flags": busy.groupby("key")["flags"].agg(
                lambda cells: tuple(sorted(set(";".join(cells).split(";"))))
            ),
        }
    ).fillna({"busy_runs": 0})


def busy_by_case(base_ok: pd.DataFrame, new_ok: pd.DataFrame) -> dict[str, Busy]:
    """Every common case's busy rows, and the whole sides' under MACHINE_WIDE; only keys with a busy
    row."""
    found: dict[str, Busy] = {}
    for keys in (
        lambda rows: rows["case_id"],
        lambda rows: pd.Series(MACHINE_WIDE, index=rows.index),
    ):
        base, new = side_counts(base_ok, keys(base_ok)), side_counts(new_ok, keys(new_ok))
        for key in base.index.intersection(new.index):
            b, n = base.loc[key], new.loc[key]
            if b["busy_runs"] or n["busy_runs"]:
                found[key] = Busy(
                    int(b["runs"]),
                    int(b["busy_runs"]),
                    int(n["runs"]),
                    int(n["busy_runs"]),
                    flags_of(b),
                    flags_of(n),
                )
    return found


def flags_of(counts: pd.Series) -> tuple[str, ...]:
    return counts["flags"] if isinstance(counts["flags"], tuple) else ()


def reads(verdict: Verdict, threshold: float) -> Judgement | None:
    """Which way an undecided case's medians read beyond the threshold (NEW/BASE), None within
    it."""
    ratio = (
        verdict.ratio
        if math.isfinite(verdict.ratio)
        else verdict.new_median_s / verdict.base_median_s
    )
    if not math.isfinite(ratio):
        return None
    if ratio > 1 + threshold:
        return Judgement.SLOWER
    return Judgement.FASTER if ratio < 1 / (1 + threshold) else None


def undecided_under_load(verdict: Verdict, busy: Busy, threshold: float) -> Verdict | None:
    """An inconclusive case whose medians read past the threshold the way one busy side's load alone
    could make them (the other side quiet): no pass either, "cannot judge: busy". With both sides
    busy the noise of each is widened and a reading within it stays inconclusive."""
    direction = reads(verdict, threshold) if verdict.verdict == Judgement.INCONCLUSIVE else None
    if direction is None:
        return None
    loaded, alone = LOAD_ALONE[direction]
    other = "BASE" if loaded == "NEW" else "NEW"
    if not busy.side(loaded) or busy.side(other):
        return None
    read = verdict.new_median_s / verdict.base_median_s
    return replace(
        verdict,
        verdict=Judgement.CANNOT_JUDGE,
        note=f"reads x{read:.3g}, undecided; {busy.why(loaded)}: {alone} — rerun {loaded} on a "
        "quiet machine",
    )


def judged_with_busy(verdict: Verdict, busy: Busy, threshold: float) -> Verdict:
    """The verdict under the direction rule, its note saying which busy side did what."""
    if (undecided := undecided_under_load(verdict, busy, threshold)) is not None:
        return undecided
    loaded, alone = LOAD_ALONE.get(verdict.verdict, ("", ""))
    if loaded and busy.side(loaded):
        return replace(
            verdict,
            verdict=Judgement.CANNOT_JUDGE,
            note=f"{busy.why(loaded)}: {alone} — rerun {loaded} on a quiet machine",
        )
    if verdict.verdict in UNDERSTATED:
        side, change = UNDERSTATED[verdict.verdict]
        note = (
            f"judged: {busy.why(side)}, so the {change} is if anything understated; noise widened"
        )
    elif verdict.verdict in (Judgement.NO_CHANGE, Judgement.INCONCLUSIVE):
        note = "noise widened: " + "; ".join(busy.why(s) for s in ("BASE", "NEW") if busy.side(s))
    else:
        return verdict
    return replace(verdict, note="; ".join(filter(None, [verdict.note, note])))


def judge_busy(
    verdicts: list[Verdict], busy: dict[str, Busy], threshold: float
) -> tuple[list[Verdict], list[str]]:
    """The verdicts under the direction rule, and a line for the cases it could not judge and one
    for those it judged with wider noise."""
    out = [
        judged_with_busy(v, busy[v.case_id], threshold) if v.case_id in busy else v
        for v in verdicts
    ]
    cases = [v for v in out if v.case_id != MACHINE_WIDE]
    cannot = sum(v.verdict == Judgement.CANNOT_JUDGE for v in cases)
    widened = sum(v.case_id in busy and v.verdict != Judgement.CANNOT_JUDGE for v in cases)
    notes = []
    if cannot:
        notes.append(
            f"{cannot} case(s) cannot be judged: rows flagged busy (another process used the CPU "
            "or GPU while they were timed) alone could have made the difference (slower with NEW "
            "busy, faster with BASE busy) — rerun that side on a quiet machine"
        )
    if widened:
        notes.append(
            f"{widened} case(s) with rows flagged busy judged with wider noise (+{BUSY_NOISE:.0%} "
            "per busy run): a slowdown against a busy BASE, or a speedup against a busy NEW, is "
            "if anything understated"
        )
    return out, notes
