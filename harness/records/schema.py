"""The results row schema, torch-free: every column declared once (type, unit, group); writer,
reader and report derive from `SCHEMA`. Bump SCHEMA_VERSION when a column changes meaning or goes,
and teach upgrade_row the old version:
  1  first release.
  2  typed columns; short case ids; one row per build; pytest-benchmark's quartiles; noise and load
     flags; memory tier; cold/warm compile; an epoch's median_s is its median step time (v1: the
     whole epoch as one sample).
  3  energy on every timed region; GPU telemetry read during it (v2: after) with throttle reasons;
     time_to_accuracy.
  4  user benchmarks' `params` and `user_figures` (flat JSON objects, sorted keys); `build_s`,
     `first_call_s`, `capped`.
  5  status `unreached` (a run to target stopped before it: what it measured kept); `training_s`,
     `epochs_trained`, `stopped_by`; `llc_total_bytes`.
  6  the budget's outcomes as flags, `over-budget` and `left-out` (docs/columns.md); every row's
     `machine_id` is records.store's (host and hardware). Through 5 it hashed the kernel release and
     the GPUs a job was given, and no host name (the last gpubench of 5 already wrote store's):
     upgrade_row replaces it with the one the row's own columns give.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from collections.abc import Callable

from gpubench.harness.core.bounds import LONGEST_TIMED_S, SHORTEST_TIMED_S
from gpubench.harness.catalog import declared_columns
from gpubench.harness.core.columns import Column, Group, Kind, _cols  # noqa: F401 - Kind/Group are this module's API

SCHEMA_VERSION = 6

SCHEMA: tuple[Column, ...] = (
    # run and machine: the fingerprint every row carries
    *_cols("run", "int", "schema_version", required="schema_version"),
    *_cols(
        "run",
        "str",
        "run_id timestamp_utc profile machine_id hostname device device_name",
        required="run_id timestamp_utc machine_id hostname device device_name",
    ),
    *_cols("run", "int", "device_count"),
    *_cols(
        "run",
        "str",
        "torch_version cuda_version cudnn_version driver_version",
        required="torch_version cuda_version",
    ),
    *_cols("run", "int", "gpu_mem_bytes", "bytes"),
    *_cols("run", "int", "sm_count"),
    *_cols("run", "str", "compute_capability cpu_model"),
    *_cols("run", "int", "cpu_cores"),
    *_cols("run", "int", "ram_bytes llc_bytes", "bytes"),
    *_cols("run", "str", "os python_version"),
    *_cols("run", "int", "torch_threads"),
    *_cols("run", "bool", "tf32_matmul tf32_cudnn"),
    *_cols("run", "str", "gpubench_version git_commit"),
    # case: identity and settings
    *_cols("case", "str", "workload case_id", required="workload case_id"),
    *_cols("case", "int", "build builds"),
    *_cols("case", "str", "dtype", required="dtype"),
    # bytes (transfer), elements (elementwise), n (matmul)
    *_cols("case", "int", "size", required="size"),
    *_cols("case", "str", "op direction"),
    *_cols("case", "bool", "pinned non_blocking"),
    *_cols("case", "str", "model"),
    *_cols("case", "int", "batch_size"),
    *_cols("case", "str", "grad_mode dataset loader"),
    *_cols("case", "int", "num_workers"),
    *_cols("case", "bool", "pin_memory persistent_workers"),
    *_cols("case", "int", "prefetch_factor"),
    *_cols("case", "str", "precision"),
    *_cols("case", "bool", "channels_last"),
    *_cols("case", "str", "compile_mode"),
    *_cols("case", "bool", "checkpointing"),
    *_cols("case", "int", "accumulation_steps effective_batch"),
    *_cols("case", "bool", "freeze_features"),
    # precision and channels_last picked by the race of the machine at hand
    *_cols("case", "bool", "raced"),
    *_cols("case", "str", "strategy"),
    *_cols("case", "int", "world_size"),
    *_cols("case", "str", "backend parallel"),
    # time_to_accuracy: template / fastest-epoch / speedrun; constant / onecycle
    *_cols("case", "str", "design schedule"),
    # peak learning rate
    *_cols("case", "float", "lr"),
    *_cols("case", "float", "target_accuracy", "frac"),
    *_cols("case", "int", "seed"),
    # measurement: derived from the raw samples (core.stats)
    *_cols("measurement", "int", "rounds iterations", required="rounds"),
    *_cols(
        "measurement",
        "float",
        "median_s iqr_s min_s mean_s stddev_s",
        "s",
        required="median_s iqr_s min_s mean_s stddev_s",
    ),
    *_cols("measurement", "float", "cv rel_iqr", "frac"),
    *_cols("measurement", "int", "iqr_outliers stddev_outliers"),
    # predicted: the cost model's, before any row of the case
    *_cols("measurement", "float", "round_s build_s first_call_s predicted_build_s", "s"),
    *_cols("measurement", "float", "cpu_busy_frac", "frac"),
    *_cols("measurement", "int", "gpu_other_procs"),
    # cudnn.allow_tf32 during the case (only cuDNN reads it)
    *_cols("measurement", "bool", "cudnn_tf32"),
    # figures: what the workload derives
    *_cols("figure", "float", "tflops peak_tflops", "TFLOP/s", required="tflops"),
    *_cols("figure", "float", "pct_of_peak", "%"),
    *_cols("figure", "float", "gbps peak_gbps", "GB/s", required="gbps"),
    *_cols("figure", "float", "pct_of_peak_gbps", "%"),
    *_cols("figure", "int", "working_set_bytes", "bytes"),
    *_cols("figure", "str", "memory_tier"),
    *_cols(
        "figure",
        "int",
        "peak_mem_bytes mem_allocated_bytes mem_reserved_bytes",
        "bytes",
        required="peak_mem_bytes",
    ),
    *_cols("figure", "str", "mem_source"),
    *_cols("figure", "float", "samples_per_s", "samples/s"),
    *_cols("figure", "float", "latency_s epoch_s step_s", "s"),
    *_cols("figure", "float", "data_wait_frac", "frac"),
    *_cols("figure", "bool", "input_bound"),
    *_cols("figure", "float", "train_loss"),
    *_cols("figure", "float", "test_accuracy", "frac"),
    *_cols("figure", "float", "compile_s compile_warm_s eager_step_s", "s"),
    *_cols("figure", "float", "break_even_steps", "steps"),
    *_cols("figure", "float", "baseline_median_s", "s"),
    *_cols("figure", "float", "speedup selfcheck_tub_ratio selfcheck_events_ratio", "x"),
    *_cols("figure", "float", "samples_per_s_per_rank", "samples/s"),
    *_cols("figure", "float", "scaling_efficiency", "frac"),
    *_cols("figure", "float", "gpu_sm_clock_mhz", "MHz"),
    *_cols("figure", "float", "gpu_temp_c", "°C"),
    *_cols("figure", "float", "gpu_power_w", "W"),
    *_cols("figure", "str", "gpu_throttle"),
    *_cols("figure", "float", "time_to_target_s", "s"),
    *_cols("figure", "float", "epochs_to_target", "epochs"),
    *_cols("figure", "float", "energy_j energy_to_target_j", "J"),
    *_cols("figure", "float", "avg_power_w", "W"),
    *_cols("figure", "str", "energy_source"),
    *_cols("figure", "float", "tflop_per_j", "TFLOP/J"),
    *_cols("figure", "float", "samples_per_j", "samples/J"),
    *_cols("figure", "str", "profile_ops"),
    # outcome
    *_cols("measurement", "str", "status reason flags", required="status reason"),
    *_cols("measurement", "json", "samples_s", "s"),
    # a user's own benchmark (measurement.user_bench): settings and figures this schema does not
    # name
    *_cols("case", "object", "params"),
    *_cols("figure", "object", "user_figures"),
    # columns workloads declare themselves (harness.catalog), after the core ones: older files keep
    # their order
    *declared_columns(),
)

BY_NAME: dict[str, Column] = {c.name: c for c in SCHEMA}
COLUMNS: tuple[str, ...] = tuple(c.name for c in SCHEMA)
RUN_COLUMNS: tuple[str, ...] = tuple(c.name for c in SCHEMA if c.group == "run")
REQUIRED_COLUMNS: tuple[str, ...] = tuple(c.name for c in SCHEMA if c.required)
NUMERIC_COLUMNS: tuple[str, ...] = tuple(c.name for c in SCHEMA if c.kind in ("int", "float"))
# a build's seed varies between the builds of one case: not a setting
SETTING_COLUMNS: tuple[str, ...] = tuple(
    c.name
    for c in SCHEMA
    if c.group == "case" and c.name not in ("workload", "case_id", "build", "builds", "seed")
)

# unreached: a run to target stopped (budget share, epoch cap) before it, with what it measured;
# neither ok nor failed
STATUSES = ("ok", "skipped", "unreached", "failed", "oom")


class SchemaError(ValueError):
    """A results file this version cannot read; the message names the file and the fix."""


class ImpossibleValue(ValueError):
    """A value no measurement gives (negative, not finite, out of range): the report refuses its
    row, not the file."""


# ---- writing -----------------------------------------------------------------------------------


def to_cell(value: Any) -> str:
    """One CSV cell: empty for None, repr for floats (exact round trip), JSON for lists, canonical
    JSON for objects (one text per value, so runs group by it)."""
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if math.isnan(value) else repr(value)
    if isinstance(value, (list, tuple)):
        return json.dumps(list(value))
    if isinstance(value, dict):
        return canonical_json(value) if value else ""
    return str(value)


def canonical_json(values: dict[str, Any]) -> str:
    return json.dumps(values, sort_keys=True, separators=(",", ":"), allow_nan=False)


# ---- reading: the cell rules -------------------------------------------------------------------
# One engine: a number's rules are data (CHECKS, per column), applied by records.results_reader to
# every number cell of a file at once and by parse_cell to one cell, which also says why a cell is
# refused.

# stripped, lower-cased
BOOL_WORDS: dict[str, bool] = {
    "true": True,
    "1": True,
    "yes": True,
    "false": False,
    "0": False,
    "no": False,
}
# What float() reads, less inf, nan, underscores and non-ASCII digits (no writer writes them).
NUMBER = re.compile(r"\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\s*", re.ASCII)


def _bool(text: str) -> bool:
    value = BOOL_WORDS.get(text.strip().lower())
    if value is None:
        raise ValueError(f"not a boolean: {text!r}")
    return value


def _float(text: str) -> float:
    if not NUMBER.fullmatch(text):
        if text.strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):
            raise ImpossibleValue("not a finite number")
        raise ValueError(f"not a number: {text!r}")
    return float(text)


def _flat(text: str, kind: type, what: str, **loads: Any) -> Any:
    """A JSON value of `kind` nesting nothing (`what`: it, in a refusal); inner brackets are refused
    first, as json's parser recurses per level."""
    if any(mark in text.strip()[1:-1] for mark in "[]{}"):
        raise ValueError(f"not a flat JSON {what}")
    value = json.loads(text, **loads)
    if not isinstance(value, kind):
        raise ValueError(f"not a JSON {what.split()[0]}")
    return value


def _json(text: str) -> list[float]:
    # an integer past a float's range is infinite, as float() reads it
    return [float(v) for v in _flat(text, list, "list of numbers", parse_int=float)]


def _object(text: str) -> dict[str, Any]:
    return _flat(text, dict, "object", parse_constant=_no_constant)


def _no_constant(name: str) -> None:
    raise ImpossibleValue(f"{name} is not a finite number")


# an int is read as a float, then held to the INTEGER check
PARSERS: dict[str, Callable[[str], Any]] = {
    "str": str,
    "int": _float,
    "float": _float,
    "bool": _bool,
    "json": _json,
    "object": _object,
}

# a row without them identifies nothing (rows group into runs by run_id)
NON_EMPTY = ("case_id", "status", "run_id")
# text columns parse_cell has rules for
TEXT_RULES = (*NON_EMPTY, "status", "timestamp_utc")

# units no measurement can take below zero (J and W are left out: an energy net of idle power may
# be)
NON_NEGATIVE_UNITS = (
    "s",
    "bytes",
    "TFLOP/s",
    "GB/s",
    "samples/s",
    "samples/J",
    "TFLOP/J",
    "%",
    "x",
    "epochs",
)
# within [0, 1]
FRACTIONS = ("test_accuracy", "target_accuracy", "data_wait_frac", "cpu_busy_frac")
# Other times in seconds (spreads, compile time net of a step) may be 0, never longer than a timed
# region.
MIN_DURATION_S, MAX_DURATION_S = SHORTEST_TIMED_S, LONGEST_TIMED_S
# what compare divides and takes logarithms of
TIMED = ("median_s", "min_s", "mean_s")
# The writer's form (utc_timestamp), offset included: week dates, basic form, no offset read as NaT
# or unordered.
TIMESTAMP = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:Z|[+-]\d{2}:\d{2})", re.ASCII
)
# outside: a broken clock or damage, and pandas cannot date it
YEARS = (1970, 2100)


@dataclass(frozen=True)
class Check:
    """A rule on a column's numbers (a samples cell's: each sample): `broken` is true where a float,
    or each of a numpy block's (operators only: no numpy import here), breaks it; `why` is the
    message (`{text}`: the cell); `impossible`: a value no measurement gives (its row refused), else
    damage (its file)."""

    broken: Callable[[Any], Any]
    why: str
    impossible: bool = True


def _outside(low: float, high: float) -> Callable[[Any], Any]:
    return lambda values: (values < low) | (values > high)


INTEGER = Check(lambda values: values % 1 != 0, "not an integer: {text!r}", impossible=False)
# inf - inf is NaN
FINITE = Check(lambda values: values - values != 0, "not a finite number")
NEGATIVE = Check(_outside(0, math.inf), "negative")
FRACTION = Check(_outside(0, 1), "outside [0, 1]")
SAMPLE = Check(
    lambda values: (values - values != 0) | (values < 0),
    "a sample that is not a non-negative duration",
)
LONGEST = Check(
    _outside(-math.inf, MAX_DURATION_S),
    f"above {MAX_DURATION_S:.0e} s: no timed region lasts 11 days",
)
SHORTEST = Check(
    _outside(MIN_DURATION_S, math.inf),
    f"below {MIN_DURATION_S:.0e} s: no timed region is shorter than a nanosecond",
)


def _checks(spec: Column) -> tuple[Check, ...]:
    """A column's number rules in the order a refused cell's message names the first one it breaks:
    an int or a finite float; counts, sizes, times, bytes, rates and ratios never negative;
    fractions, times and samples bounded."""
    if spec.kind == "json":
        return (SAMPLE, LONGEST, SHORTEST)
    applies = {
        INTEGER: spec.kind == "int",
        FINITE: spec.kind == "float",
        NEGATIVE: spec.kind == "int" or spec.unit in NON_NEGATIVE_UNITS,
        FRACTION: spec.name in FRACTIONS,
        LONGEST: spec.unit == "s",
        SHORTEST: spec.name in TIMED,
    }
    return (
        tuple(check for check, yes in applies.items() if yes)
        if spec.kind in ("int", "float")
        else ()
    )


CHECKS: dict[str, tuple[Check, ...]] = {spec.name: _checks(spec) for spec in SCHEMA}


def parse_cell(column: str, text: str | None) -> Any:
    """A typed value from a CSV cell: None when empty; ValueError when not its type or against its
    rules (ImpossibleValue for a value no measurement gives)."""
    if text is None or text == "":
        if column in NON_EMPTY:
            raise ValueError("empty")
        return None
    kind = kind_of(column)
    value = PARSERS[kind](text)
    for check in CHECKS.get(column, ()):
        if any(check.broken(v) for v in (value if kind == "json" else [value])):
            raise (ImpossibleValue if check.impossible else ValueError)(check.why.format(text=text))
    _check_text(column, value)
    return int(value) if kind == "int" else value


def _check_text(column: str, value: Any) -> None:
    """The rules on a text or object value: figures are numbers, a status is known, a timestamp is
    ISO 8601."""
    if column == "user_figures" and any(
        isinstance(v, bool) or not isinstance(v, (int, float)) for v in value.values()
    ):
        raise ValueError("a figure that is not a number")
    if column == "status" and value not in STATUSES:
        raise ValueError(f"not one of {', '.join(STATUSES)}")
    # the writer's are ISO 8601 (utc_timestamp): anything else is damage, not a time
    if column == "timestamp_utc":
        try:
            year = datetime.fromisoformat(value).year if TIMESTAMP.fullmatch(value) else None
        # a form the pattern admits with an impossible date (month 13)
        except ValueError:
            year = None
        if year is None:
            raise ValueError(
                "not an ISO 8601 timestamp with its offset, as 2026-11-29T12:00:00+00:00"
            )
        if not YEARS[0] <= year < YEARS[1]:
            raise ImpossibleValue(
                f"year {year}, outside {YEARS[0]} to {YEARS[1]}: a broken clock or an edited file"
            )


def kind_of(column: str) -> Kind:
    """A column's kind; a column this version does not know (a newer writer's) is text."""
    spec = BY_NAME.get(column)
    return spec.kind if spec else "str"


def typed_row(raw: dict[str, str], where: str) -> dict[str, Any]:
    """Every known column parsed to its type; unknown columns (from a newer writer) kept as text."""
    row: dict[str, Any] = {}
    for column, text in raw.items():
        try:
            row[column] = parse_cell(column, text)
        except ValueError as error:
            raise SchemaError(
                f"{where}: column {column} holds {text!r} ({error}) — the file is damaged; "
                "re-run the case or delete the line"
            ) from None
    return row
