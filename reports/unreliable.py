"""Rows that carry no verdict: a case whose rows say another process shared the machine while they were timed
is inconclusive in `gpubench compare`, whatever its ratio."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from gpubench.reports.verdicts import MACHINE_WIDE, Judgement, Verdict

# A verdict on such rows would be the other process's, not the change's (two smoke runs of unchanged code read
# x9.5 "slower" on the three rows of the second run flagged busy).
SET_ASIDE_FLAGS = {"busy": "another process used the CPU", "busy-gpu": "another process used the GPU"}


def unreliable_because(base_rows: pd.DataFrame, new_rows: pd.DataFrame) -> str:
    """Why a case's rows cannot carry a verdict ('' when they can): the set-aside flags on either side."""
    found = []
    for side, rows in (("BASE", base_rows), ("NEW", new_rows)):
        cells = rows.get("flags", pd.Series(dtype=str)).fillna("")
        flags = {flag for cell in cells for flag in str(cell).split(";")}
        found += [f"{side} rows flagged {flag} ({why})" for flag, why in SET_ASIDE_FLAGS.items() if flag in flags]
    return "; ".join(found)


def set_aside(verdicts: list[Verdict], base: pd.DataFrame, new: pd.DataFrame) -> tuple[list[Verdict], int]:
    """Slower/faster verdicts on busy rows made inconclusive, and the machine-wide one too once any case was
    (a busy machine moves every case). Returns them and how many cases were set aside."""
    kept, count = [], 0
    for v in verdicts:
        why = unreliable_because(base[base["case_id"] == v.case_id], new[new["case_id"] == v.case_id])
        if v.verdict in (Judgement.SLOWER, Judgement.FASTER) and why:
            v, count = replace(v, verdict=Judgement.INCONCLUSIVE, note=f"set aside: {why}"), count + 1
        kept.append(v)
    if count:
        kept = [replace(v, verdict=Judgement.INCONCLUSIVE, note=f"set aside: {count} case(s) flagged busy")
                if v.case_id == MACHINE_WIDE and v.verdict in (Judgement.SLOWER, Judgement.FASTER) else v
                for v in kept]
    return kept, count
