"""Runs and builds of one configuration folded into one figure per case, with its spread: the report
grows with machines and cases, never with runs (every table below the raw merged CSV reads
`per_case`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpubench.harness.records.schema import NUMERIC_COLUMNS, SETTING_COLUMNS, parse_cell

KEYS = ["machine", "workload", "case_id", "setting"]
# a user's own figure (the `user_figures` column) as a column of the cases: user.loss
USER_PREFIX = "user."


def user_figure_columns(rows: pd.DataFrame) -> pd.DataFrame:
    """The `user_figures` JSON of each row as numeric columns `user.<name>` (NaN where a row has
    none)."""
    if "user_figures" not in rows or rows["user_figures"].isna().all():
        return pd.DataFrame(index=rows.index)
    parsed = {
        text: parse_cell("user_figures", text) for text in rows["user_figures"].dropna().unique()
    }
    values = [
        parsed.get(text) or {} if isinstance(text, str) else {} for text in rows["user_figures"]
    ]
    return pd.DataFrame(values, index=rows.index, dtype=float).add_prefix(USER_PREFIX)


# kept as they are, per case
EXTRAS = ("device_name", "memory_tier", "mem_source", "input_bound", "torch_version")


def union_flags(values: pd.Series) -> str:
    return ";".join(sorted({flag for text in values for flag in str(text).split(";") if flag}))


def column_or(frame: pd.DataFrame, name: str, empty: object = None) -> pd.Series:
    """A column, `empty` in every row where an older schema lacks it."""
    return frame[name] if name in frame else pd.Series(empty, index=frame.index, dtype=object)


def per_case(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (machine, case) over the ok rows: numeric columns as medians over builds and
    runs, settings as they are, `builds`, `runs`, `spread` (IQR/median of median_s between builds)
    and the union of flags."""
    read = {*KEYS, *NUMERIC_COLUMNS, *SETTING_COLUMNS, *EXTRAS, "run_id", "flags", "user_figures"}
    # only the columns read below are copied: a store's frame has a hundred more (raw samples among
    # them)
    ok = frame.loc[
        frame["status"] == "ok",
        [c for c in frame.columns if c in read or c.startswith(USER_PREFIX)],
    ]
    ok = ok.join(user_figure_columns(ok))
    numeric = [
        c for c in NUMERIC_COLUMNS if c in ok and c not in ("build", "builds", "schema_version")
    ]
    numeric += [c for c in ok.columns if c.startswith(USER_PREFIX)]
    settings = [c for c in SETTING_COLUMNS if c in ok and c not in numeric]
    extras = [c for c in EXTRAS if c in ok and c not in settings]
    # every row skipped or failed: no case, but every column a table may ask for
    if ok.empty:
        return pd.DataFrame(
            columns=[*KEYS, *numeric, *settings, *extras, "builds", "runs", "spread", "flags"]
        )
    grouped = ok.groupby(KEYS, sort=False)
    out = grouped[numeric].median().join(grouped[settings + extras].first())
    out["builds"] = grouped.size()
    out["runs"] = grouped["run_id"].nunique()
    # vectorized: 1000s of groups
    quartiles = grouped["median_s"].quantile([0.25, 0.75]).unstack()
    out["spread"] = ((quartiles[0.75] - quartiles[0.25]) / out["median_s"]).where(
        grouped["median_s"].count() > 1
    )
    # the builds' quartiles: headline rules and plot bands
    for figure in ("tflops", "gbps", "samples_per_s"):
        if figure in ok and ok[figure].notna().any():
            q = grouped[figure].quantile([0.25, 0.75]).unstack()
            out[f"{figure}_q1"], out[f"{figure}_q3"] = q[0.25], q[0.75]
    flagged = ok[ok["flags"] != ""]
    out["flags"] = (
        flagged.groupby(KEYS, sort=False)["flags"].agg(union_flags).reindex(out.index).fillna("")
    )
    return out.reset_index()


def geomean(values: pd.Series) -> float:
    values = values.dropna()
    values = values[values > 0]
    return float(np.exp(np.log(values).mean())) if len(values) else float("nan")
