"""Attention's fraction of this machine's matmul, one denominator per dtype in runs made before the
workload set every backend against its own dtype's matmul: such a run set the math backend's bf16
and fp16 rows against the fp32 matmul (torch upcasts them), so in one panel math read far above
flash while flash was faster in TFLOP/s. Here those rows are set against the same build's matmul in
their dtype, measured for the other backends' rows."""

from __future__ import annotations

import pandas as pd

# the one backend an older run set against the fp32 matmul for bf16 and fp16
UPCAST_BACKEND = "math"
COLUMNS = {
    "sdpa_backend",
    "dtype",
    "tflops",
    "measured_peak_tflops",
    "pct_of_measured_peak",
    "machine",
}


def same_dtype_pct(cases: pd.DataFrame) -> pd.DataFrame:
    """`cases` with each upcast row's matmul and fraction taken from its machine's rows of the same
    dtype."""
    if not COLUMNS <= set(cases.columns):
        return cases
    upcast = cases["sdpa_backend"].eq(UPCAST_BACKEND) & cases["dtype"].isin(["bf16", "fp16"])
    fused = cases[~upcast & cases["sdpa_backend"].notna() & cases["measured_peak_tflops"].notna()]
    if not upcast.any() or fused.empty:
        return cases
    peaks = fused.groupby(["machine", "dtype"])["measured_peak_tflops"].median()
    keys = list(zip(cases.loc[upcast, "machine"], cases.loc[upcast, "dtype"]))
    own = pd.Series([peaks.get(key) for key in keys], index=cases.index[upcast], dtype=float)
    own = own.dropna()
    fixed = cases.copy()
    fixed.loc[own.index, "measured_peak_tflops"] = own
    fixed.loc[own.index, "pct_of_measured_peak"] = 100 * fixed.loc[own.index, "tflops"] / own
    return fixed
