"""One build of one case as a results row from typed parts; `Row.columns()` is the only place they
become columns. Where two parts name one column the later wins: fingerprint, case, measurement,
figures (a workload may restate a setting it derived, e.g. its effective batch), memory, energy,
first call, status, load, cost."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from gpubench.harness.core.stats import SampleStats
from gpubench.harness.records.schema import COLUMNS, RUN_COLUMNS, SCHEMA_VERSION

Columns = Mapping[str, Any]
KNOWN_COLUMNS = frozenset(COLUMNS)


def fingerprint_columns(env: Columns, run_id: str, profile: str) -> dict[str, Any]:
    """The columns every row of a run shares: the machine's fingerprint, schema, run id and
    profile."""
    return {
        **{k: v for k, v in env.items() if k in RUN_COLUMNS},
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "profile": str(profile),
    }


@dataclass(frozen=True)
class CaseColumns:
    """Which case, which of its builds, its settings, and the cuDNN TF32 flag it ran under."""

    timestamp_utc: str
    workload: str
    case_id: str
    build: int
    builds: int
    settings: Columns
    cudnn_tf32: bool | None

    def columns(self) -> dict[str, Any]:
        return {
            "timestamp_utc": self.timestamp_utc,
            "workload": self.workload,
            "case_id": self.case_id,
            "build": self.build,
            "builds": self.builds,
            **self.settings,
            "cudnn_tf32": self.cudnn_tf32,
        }


@dataclass(frozen=True)
class MeasuredColumns:
    """Statistics of the raw samples (seconds per call) and the samples themselves."""

    stats: SampleStats
    iterations: int
    samples_s: list[float]

    def columns(self) -> dict[str, Any]:
        stats = self.stats
        return {
            "rounds": stats.rounds,
            "iterations": self.iterations,
            "median_s": stats.median_s,
            "iqr_s": stats.iqr_s,
            "min_s": stats.min_s,
            "mean_s": stats.mean_s,
            "stddev_s": stats.stddev_s,
            "cv": stats.cv,
            "rel_iqr": stats.rel_iqr,
            "iqr_outliers": stats.iqr_outliers,
            "stddev_outliers": stats.stddev_outliers,
            "round_s": stats.median_s * self.iterations,
            "samples_s": self.samples_s,
        }


@dataclass(frozen=True)
class Memory:
    """Peak, allocated and reserved memory of the timed region, and where the peak was read."""

    peak_mem_bytes: int | None
    mem_source: str | None
    mem_allocated_bytes: int | None
    mem_reserved_bytes: int | None

    def columns(self) -> dict[str, Any]:
        # each field is its column
        return asdict(self)


@dataclass(frozen=True)
class Status:
    """ok / skipped / unreached / failed / oom, the reasons a reader must see, and the row's
    flags."""

    status: str
    reason: str
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class CaseResult:
    """A build's status and, when measured, its parts; `figures` are the workload's (for a failure,
    its error's)."""

    status: Status
    measurement: MeasuredColumns | None = None
    first_call_s: float | None = None
    figures: Columns = field(default_factory=dict)
    memory: Memory | None = None
    energy: Columns = field(default_factory=dict)

    def columns(self) -> dict[str, Any]:
        measured = self.measurement.columns() if self.measurement is not None else {}
        memory = self.memory.columns() if self.memory is not None else {}
        first_call = {"first_call_s": self.first_call_s} if self.measurement is not None else {}
        return {
            **measured,
            **self.figures,
            **memory,
            **self.energy,
            **first_call,
            "status": self.status.status,
            "reason": self.status.reason,
        }


@dataclass(frozen=True)
class Load:
    """Other work on the machine while the case ran: CPU busy fraction, other GPU processes,
    flags."""

    # None: not measured (a torchrun worker's own row)
    cpu_busy_frac: float | None
    gpu_other_procs: int | None = None
    flags: tuple[str, ...] = ()

    def columns(self) -> dict[str, Any]:
        gpu = {"gpu_other_procs": self.gpu_other_procs} if self.gpu_other_procs is not None else {}
        return {"cpu_busy_frac": self.cpu_busy_frac, **gpu}


@dataclass(frozen=True)
class Row:
    """One row of the results file, from its parts."""

    fingerprint: Columns
    case: CaseColumns
    result: CaseResult
    load: Load
    build_s: float | None
    # what the cost model expected the build to take
    predicted_build_s: float | None = None

    def columns(self) -> dict[str, Any]:
        """The row's columns, each named by the schema; flags joined once, without repeats."""
        flags = ";".join(dict.fromkeys(self.result.status.flags + self.load.flags))
        columns = {
            **self.fingerprint,
            **self.case.columns(),
            **self.result.columns(),
            "flags": flags,
            **self.load.columns(),
            "build_s": self.build_s,
            "predicted_build_s": self.predicted_build_s,
        }
        unknown = sorted(set(columns) - KNOWN_COLUMNS)
        if unknown:
            raise ValueError(
                f"columns missing from gpubench.harness.records.schema: {unknown} — "
                "declare them in the schema or the workload's catalogue entry"
            )
        return columns
