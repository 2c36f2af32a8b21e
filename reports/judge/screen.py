"""Rows the report refuses to show: what takes the whole row to see (a TFLOP/s above its device's
datasheet peak, an ok row whose headline figure is empty); the reader already refuses cells
impossible on their own. Each refused row is one line `file:line: column X = value is impossible
(why)`; the report goes on without it and lists them. Rows with a derived figure past its bound
(gpubench.harness.core.bounds: a scaling efficiency, an MFU, a bandwidth) stay in the tables,
flagged, but the summary, the answer and the health verdicts leave them out: `left_out`."""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

from gpubench.harness.catalog import spec_for
from gpubench.harness.core.bounds import bounds_for
from gpubench.harness.core.exits import UsageError
from gpubench.harness.core.flags import IMPOSSIBLE
from gpubench.harness.core.peaks import peak_tflops
from gpubench.reports.judge.aggregate import column_or, per_case
from gpubench.reports.judge.same_dtype import same_dtype_pct


def _peak(device_name: str, dtype: str, tf32: bool) -> float:
    """fp32 with TF32 matmuls allowed runs at TF32's peak."""
    return peak_tflops(device_name, "tf32" if dtype == "fp32" and tf32 else dtype) or math.inf


def above_peak(frame: pd.DataFrame) -> pd.Series:
    """Per row: why its TFLOP/s is impossible, or None. Peaks are looked up once per (device, dtype,
    tf32)."""
    keys = [
        (str(n), str(d), t is True)
        for n, d, t in zip(frame["device_name"], frame["dtype"], frame["tf32_matmul"])
    ]
    table = {key: _peak(*key) for key in set(keys)}
    peaks = pd.Series([table[key] for key in keys], index=frame.index, dtype=float)
    over = frame["tflops"] > peaks
    return pd.Series(
        [
            f"above the {d} datasheet peak {p:g} TFLOP/s of {n}" if o else None
            for o, (n, d, _), p in zip(over, keys, peaks)
        ],
        index=frame.index,
        dtype=object,
    )


def without_headline(frame: pd.DataFrame) -> pd.Series:
    """Per row: the empty figure an ok row cannot be shown without (median_s, or its workload's
    first headline)."""
    ok = frame["status"] == "ok"
    missing = pd.Series(None, index=frame.index, dtype=object)
    for workload in frame.loc[ok, "workload"].unique():
        spec = spec_for(str(workload))
        column = spec.headlines[0][0] if spec and spec.headlines else None
        if column in frame:
            missing[ok & (frame["workload"] == workload) & frame[column].isna()] = column
    missing[ok & frame["median_s"].isna()] = "median_s"
    return missing


# Throughput figures a row derives from its median: the figure times median_s is the work one call
# does.
THROUGHPUT = ("tflops", "gbps", "samples_per_s", "tokens_per_s")
Work = Callable[[pd.DataFrame], pd.Series]
# The work one call does as a row's own settings state it, per workload: (figure, its work per
# call).
STATED_WORK: dict[str, tuple[str, Work]] = {
    "matmul": ("tflops", lambda rows: 2 * rows["size"] ** 3 / 1e12),
    "matmul_speedup": ("tflops", lambda rows: 2 * rows["size"] ** 3 / 1e12),
    "selfcheck": ("tflops", lambda rows: 2 * rows["size"] ** 3 / 1e12),
    "transfer": ("gbps", lambda rows: rows["size"] / 1e9),
    "conv2d": ("samples_per_s", lambda rows: rows["batch_size"]),
    "inference": ("samples_per_s", lambda rows: rows["batch_size"]),
    "transformer": ("samples_per_s", lambda rows: rows["batch_size"]),
}
# A row's figure and median may disagree by rounding; past this factor either way they contradict
# each other.
AGREE_FACTOR = 1.1


def _expected_work(
    frame: pd.DataFrame, figure: str, stated: pd.Series, ok: pd.Series
) -> tuple[pd.Series, str]:
    """Per row, the work one call of its case does: as its settings state it where its workload says
    (STATED_WORK), else the median its case's ok rows of its run in its file state; and where it
    came from, per row."""
    per_file = column_or(frame, "source_path", "").fillna("").astype(str)
    # a case's rows of one run in one file: another run's rows there (planted or not) are no peers
    # of its own
    peers = [per_file, frame["run_id"], frame["case_id"]]
    expected = stated.where(ok).groupby(peers).transform("median")
    basis = pd.Series("the other rows of its case in its run", index=frame.index, dtype=object)
    for workload, (column, work) in STATED_WORK.items():
        rows = frame["workload"].eq(workload)
        if column == figure and rows.any():
            expected[rows] = pd.to_numeric(work(frame[rows]), errors="coerce")
            basis[rows] = "its settings"
    return expected, basis


def contradicting(frame: pd.DataFrame) -> pd.Series:
    """Per ok row: why its median_s contradicts a throughput figure of its own (the work per call
    the two imply is more than AGREE_FACTOR from what its settings, else its case's other rows of
    its run, state), or None."""
    reasons = pd.Series(None, index=frame.index, dtype=object)
    median_s = pd.to_numeric(frame["median_s"], errors="coerce")
    for figure in (f for f in THROUGHPUT if f in frame):
        values = pd.to_numeric(frame[figure], errors="coerce")
        ok = frame["status"].eq("ok") & (values > 0) & (median_s > 0)
        stated = values * median_s
        expected, basis = _expected_work(frame, figure, stated, ok)
        ratio = stated / expected
        off = ok & ((ratio > AGREE_FACTOR) | (ratio < 1 / AGREE_FACTOR)) & reasons.isna()
        reasons[off] = [
            f"column median_s = {m:g} contradicts its own {figure} = {v:g}: one call's work would "
            f"be {r:.3g}x what {b} state — not a measurement"
            for m, v, r, b in zip(median_s[off], values[off], ratio[off], basis[off])
        ]
    return reasons


def screen(frame: pd.DataFrame, paths: dict[str, str], refused: list[str]) -> pd.DataFrame:
    """`frame` less the rows above their peak, contradicting themselves or without their figure,
    each named in `refused` (`paths`: source_file stem -> the file's path, where a row holds no
    `source_path`)."""
    peak = above_peak(frame)
    empty = without_headline(frame)
    contradiction = contradicting(frame).where(peak.isna())
    for index in frame.index[peak.notna()]:
        refused.append(
            f"{_where(frame, index, paths)}: column tflops = {frame.at[index, 'tflops']:g} "
            f"is impossible ({peak[index]})"
        )
    for index in frame.index[contradiction.notna()]:
        refused.append(f"{_where(frame, index, paths)}: {contradiction[index]}")
    for index in frame.index[empty.notna() & peak.isna() & contradiction.isna()]:
        refused.append(
            f"{_where(frame, index, paths)}: column {empty[index]} is empty in an ok row "
            "(no figure to show)"
        )
    return frame[peak.isna() & empty.isna() & contradiction.isna()]


def refuse_contradicting(*frames: pd.DataFrame) -> None:
    """A UsageError naming the first row whose median contradicts its own throughput
    (`contradicting`): where rows are not left out (compare), such a file is refused, never
    judged."""
    for frame in frames:
        reasons = contradicting(frame)
        if reasons.notna().any():
            index = reasons.first_valid_index()
            raise UsageError(
                f"{_where(frame, index, {})}: {reasons[index]} — the file is damaged; re-run the "
                "case or delete the line"
            )


def _where(frame: pd.DataFrame, index: object, paths: dict[str, str]) -> str:
    stem = str(frame.at[index, "source_file"])
    path = frame.at[index, "source_path"] if "source_path" in frame else paths.get(stem, stem)
    return f"{path}:{int(frame.at[index, 'source_line'])}"


def _text(frame: pd.DataFrame, name: str) -> pd.Series:
    """A text column, "" where an older schema lacks it or a cell is empty."""
    return column_or(frame, name, "").fillna("").astype(str)


def past_bounds(frame: pd.DataFrame) -> pd.Series:
    """Per ok row: why a figure of it is past its bound, or None; the bounds are looked up once per
    (device, number format, memory tier), as the row writer applies them (fp32 with TF32 matmuls
    allowed: TF32's peak)."""
    reasons = pd.Series(None, index=frame.index, dtype=object)
    tf32 = column_or(frame, "tf32_matmul").eq(True)
    dtype = _text(frame, "dtype").mask(_text(frame, "dtype").eq("fp32") & tf32, "tf32")
    # an older elementwise row says none: it may be cache-resident, so no claim
    tier = _text(frame, "memory_tier")
    tier = tier.mask(tier.eq("") & _text(frame, "workload").eq("elementwise"), "cache")
    keys = pd.DataFrame({"device": _text(frame, "device_name"), "dtype": dtype, "tier": tier})
    for (device, number_format, tier), rows in keys[frame["status"] == "ok"].groupby(
        list(keys), sort=False
    ):
        for bound in bounds_for(str(device), str(number_format), str(tier) or None):
            if bound.column not in frame:
                continue
            values = pd.to_numeric(frame.loc[rows.index, bound.column], errors="coerce")
            past = values[(values > bound.limit) & reasons[rows.index].isna()]
            reasons[past.index] = [bound.reason(float(value)) for value in past]
    return reasons


def left_out(frame: pd.DataFrame) -> pd.Series:
    """Per row: why the summary, the answer and the health verdicts leave it out, or None: an ok row
    past a bound now (a row written before the flag too), else one its writer flagged impossible (in
    its reason's own words)."""
    flagged = (frame["status"] == "ok") & _text(frame, "flags").str.contains(
        rf"(?:^|;){IMPOSSIBLE}(?:;|$)"
    )
    said = (
        _text(frame, "reason")
        .str.extract(rf"({IMPOSSIBLE}: [^;]*)")[0]
        .fillna(f"flagged {IMPOSSIBLE}")
    )
    return past_bounds(frame).fillna(said.where(flagged))


def is_smoke(frame: pd.DataFrame) -> pd.Series:
    """Rows of the smoke profile: the suite's own test, at sizes no figure of which is
    comparable."""
    return column_or(frame, "profile", "").astype(str).eq("smoke")


def shadowed_smoke(frame: pd.DataFrame, smoke: pd.Series) -> pd.Series:
    """Smoke rows of a case the same machine also measured at a real profile: a workload table folds
    a case's rows into one median, and a 2,048-image smoke epoch is not one of the full epoch's
    builds."""
    measured = set(zip(frame.loc[~smoke, "machine"], frame.loc[~smoke, "case_id"]))
    return smoke & pd.Series(
        [key in measured for key in zip(frame["machine"], frame["case_id"])], index=frame.index
    )


def trusted(
    measured: pd.DataFrame, cases: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame, pd.Series]:
    """The rows and cases the summary, the answer and the health verdicts read: none with a figure
    past its bound; third, per row of `measured`, why it is left out (left_out)."""
    reasons = left_out(measured)
    if reasons.isna().all():
        return measured, cases, reasons
    kept = measured[reasons.isna()]
    return kept, same_dtype_pct(per_case(kept)), reasons


def impossible(flags: pd.Series) -> pd.Series:
    """Per cell of a flags column: whether it carries `impossible` (a figure past its bound, never
    shown bare)."""
    return flags.map(lambda cell: IMPOSSIBLE in str(cell).split(";"))
