"""Which builds speak for a case in a report: those the machine let run undisturbed, where the case
has any. A busy build reads slow, never fast, so mixed with quiet ones it moves the median with the
load (a quiet build's 0.182 TFLOP/s and a busy one's 0.070 read "0.126 ±45%"). A case with busy
builds only keeps them, and its figures say so. One rule for the summary, the answer, the tables and
the plots."""

from __future__ import annotations

import pandas as pd

from gpubench.reports.judge.aggregate import column_or
from gpubench.harness.core.flags import BUSY_FLAGS

KEYS = ["machine", "case_id"]
BUSY_ONLY = "busy builds only"


def busy_flagged(frame: pd.DataFrame) -> pd.Series:
    """Per row: whether another process used the CPU or the GPU while it was timed (a busy flag)."""
    flags = column_or(frame, "flags", "").fillna("").astype(str)
    return flags.map(lambda cell: bool(BUSY_FLAGS & set(cell.split(";")))).astype(bool)


def set_aside(frame: pd.DataFrame) -> pd.Series:
    """Per row: a busy ok build of a case that also has an undisturbed ok build on the same
    machine."""
    if frame.empty or not set(KEYS) <= set(frame.columns):
        return pd.Series(False, index=frame.index)
    ok = frame["status"] == "ok"
    busy = ok & busy_flagged(frame)
    quiet = (ok & ~busy).groupby([frame[key] for key in KEYS], sort=False).transform("any")
    return busy & quiet


def undisturbed(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` without the busy builds of cases that have undisturbed ones."""
    return frame[~set_aside(frame)]


def set_aside_note(frame: pd.DataFrame) -> str:
    """'3 busy builds set aside: their cases have undisturbed builds' or ''."""
    count = int(set_aside(frame).sum())
    if not count:
        return ""
    builds = "build" if count == 1 else "builds"
    return (
        f"{count} busy {builds} set aside: their cases have undisturbed builds, which alone give "
        "the figures"
    )


def busy_only(flags: object) -> bool:
    """Whether a case's union of flags (after undisturbed) says its every build ran busy."""
    return isinstance(flags, str) and bool(BUSY_FLAGS & set(flags.split(";")))


def marked(text: str, flags: object) -> str:
    """A figure's text, with '(busy builds only)' where its builds all ran beside other work."""
    return f"{text} ({BUSY_ONLY})" if text and busy_only(flags) else text


def is_busy(rows: pd.DataFrame) -> pd.Series:
    """Per row: a build of it was measured while another process used the CPU or the GPU."""
    if "flags" not in rows:
        return pd.Series(False, index=rows.index)
    flags = rows["flags"].fillna("").astype(str).str.split(";")
    return flags.map(lambda found: any(flag.strip() in BUSY_FLAGS for flag in found))
