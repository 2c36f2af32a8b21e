"""Rows the report refuses to show: what takes the whole row to see (a TFLOP/s above its device's datasheet peak,
an ok row whose headline figure is empty); the reader already refuses cells impossible on their own. Each refused
row is one line `file:line: column X = value is impossible (why)`; the report goes on without it and lists them."""

from __future__ import annotations

import math

import pandas as pd

from gpubench.harness.catalog import spec_for
from gpubench.harness.core.peaks import peak_tflops


def _peak(device_name: str, dtype: str, tf32: bool) -> float:
    """fp32 with TF32 matmuls allowed runs at TF32's peak."""
    return peak_tflops(device_name, "tf32" if dtype == "fp32" and tf32 else dtype) or math.inf


def above_peak(frame: pd.DataFrame) -> pd.Series:
    """Per row: why its TFLOP/s is impossible, or None. Peaks are looked up once per (device, dtype, tf32)."""
    keys = [(str(n), str(d), t is True) for n, d, t in zip(frame["device_name"], frame["dtype"], frame["tf32_matmul"])]
    table = {key: _peak(*key) for key in set(keys)}
    peaks = pd.Series([table[key] for key in keys], index=frame.index, dtype=float)
    over = frame["tflops"] > peaks
    return pd.Series([f"above the {d} datasheet peak {p:g} TFLOP/s of {n}" if o else None
                      for o, (n, d, _), p in zip(over, keys, peaks)], index=frame.index, dtype=object)


def without_headline(frame: pd.DataFrame) -> pd.Series:
    """Per row: the empty figure an ok row cannot be shown without (median_s, or its workload's first headline)."""
    ok = frame["status"] == "ok"
    missing = pd.Series(None, index=frame.index, dtype=object)
    for workload in frame.loc[ok, "workload"].unique():
        spec = spec_for(str(workload))
        column = spec.headlines[0][0] if spec and spec.headlines else None
        if column in frame:
            missing[ok & (frame["workload"] == workload) & frame[column].isna()] = column
    missing[ok & frame["median_s"].isna()] = "median_s"
    return missing


def screen(frame: pd.DataFrame, paths: dict[str, str], refused: list[str]) -> pd.DataFrame:
    """`frame` less the rows above their peak or without their figure, each named in `refused` (`paths`: source_file
    stem -> the file's path)."""
    peak = above_peak(frame)
    empty = without_headline(frame)
    for index in frame.index[peak.notna()]:
        refused.append(f"{_where(frame, index, paths)}: column tflops = {frame.at[index, 'tflops']:g} "
                       f"is impossible ({peak[index]})")
    for index in frame.index[empty.notna() & peak.isna()]:
        refused.append(f"{_where(frame, index, paths)}: column {empty[index]} is empty in an ok row "
                       "(no figure to show)")
    return frame[peak.isna() & empty.isna()]


def _where(frame: pd.DataFrame, index: object, paths: dict[str, str]) -> str:
    stem = str(frame.at[index, "source_file"])
    return f"{paths.get(stem, stem)}:{int(frame.at[index, 'source_line'])}"
