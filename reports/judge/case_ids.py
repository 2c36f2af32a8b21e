"""One setting, one case across versions: a case id one side measured and the other did not, whose
settings equal those of a case only the other side measured, is that case renamed (a fixed setting
of an older version that a newer one reaches by its epoch race, say). Compare judges the two as one
case and says it did."""

from __future__ import annotations

import pandas as pd

from gpubench.harness.records.schema import SETTING_COLUMNS

# how a case was chosen, not what it runs: a raced case runs the setting its race picked
NOT_SETTINGS = frozenset({"raced"})


def settings_of(rows: pd.DataFrame) -> dict[str, dict[str, str]]:
    """case_id -> its first ok row's settings that are set, as text (True and 'True' alike)."""
    columns = [c for c in SETTING_COLUMNS if c in rows and c not in NOT_SETTINGS]
    first = rows[rows["status"] == "ok"].drop_duplicates("case_id")
    return {
        str(case): {
            c: str(v) for c, v in zip(columns, values) if pd.notna(v) and str(v) not in ("", "None")
        }
        for case, *values in zip(first["case_id"], *(first[c] for c in columns))
    }


def alike(mine: dict[str, str], theirs: dict[str, str]) -> bool:
    """The same setting: every column both sides set holds the same value, and they share at least
    one."""
    shared = mine.keys() & theirs.keys()
    return bool(shared) and all(mine[c] == theirs[c] for c in shared)


def matching(settings: dict[str, str], pool: dict[str, dict[str, str]], workload: str) -> list[str]:
    return [
        case
        for case, theirs in pool.items()
        if case.split("/", 1)[0] == workload and alike(settings, theirs)
    ]


def renames(base: pd.DataFrame, new: pd.DataFrame) -> dict[str, str]:
    """BASE case id -> NEW case id, for cases each side alone measured whose settings match one case
    of the other side's alone, both ways (within one workload)."""
    base_settings, new_settings = settings_of(base), settings_of(new)
    only_base = {case: s for case, s in base_settings.items() if case not in new_settings}
    only_new = {case: s for case, s in new_settings.items() if case not in base_settings}
    mapped = {}
    for case, settings in only_base.items():
        workload = case.split("/", 1)[0]
        forward = matching(settings, only_new, workload)
        if len(forward) == 1 and matching(only_new[forward[0]], only_base, workload) == [case]:
            mapped[case] = forward[0]
    return mapped


def as_new_ids(base: pd.DataFrame, new: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """BASE with its renamed cases under NEW's ids, and a note per case renamed."""
    mapped = renames(base, new)
    if not mapped:
        return base, []
    notes = [
        f"note: BASE's {old} is NEW's {current} (the same settings under another case id): "
        "compared as one case"
        for old, current in sorted(mapped.items())
    ]
    return base.assign(case_id=base["case_id"].replace(mapped)), notes
