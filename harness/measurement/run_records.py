"""RunRecords owns one run's records: fingerprint, idle power, the results writer, sidecars and what
stops the run. The environment sidecar is written on open, before the first case, so a disk filling
later costs rows, never the run's description; the first build's process rewrites it on close with
the GPU telemetry then."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Callable

import torch

from gpubench.harness.devices.energy import EnergyMeter, idle_power_w
from gpubench.harness.devices.env import fingerprint, gpu_telemetry
from gpubench.harness.records.results import ResultsFull, ResultsWriter, write_sidecar
from gpubench.harness.records.results_reader import read_rows
from gpubench.harness.records.row import fingerprint_columns


@dataclass
class RunStop:
    """Why the run stops before its last case: one line for the person and an exit code."""

    line: str
    code: int


@dataclass
class RunRecords:
    """One run's records, written from `open` on, so a run that records nothing writes nothing.
    `build` > 0: a later build process, appending to a run an earlier one opened and described."""

    device: torch.device
    results_dir: Path
    run_id: str
    profile: str
    energy: EnergyMeter = field(default_factory=lambda: EnergyMeter(None))
    build: int = 0
    fingerprint_of: Callable[[torch.device], dict[str, Any]] = fingerprint
    writer: ResultsWriter | None = None
    env: dict[str, Any] = field(default_factory=dict)
    telemetry_start: dict[str, Any] = field(default_factory=dict)
    idle_power_w: float | None = None
    # case_id -> reason, from its first build
    skipped: dict[str, str] = field(default_factory=dict)
    top_ops: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    stop: RunStop | None = None
    # SIGTERM arrived: the run is stopping
    terminated: bool = False
    closed: bool = False

    @property
    def csv_path(self) -> Path:
        return self.results_dir / f"{self.run_id}.csv"

    @property
    def is_open(self) -> bool:
        return self.writer is not None

    @property
    def rows_written(self) -> int:
        return self.writer.rows_written if self.writer is not None else 0

    def open(self) -> None:
        """Fingerprint, idle power (first build only), the writer, and the environment sidecar."""
        if self.writer is not None:
            return
        self.env = self.fingerprint_of(self.device)
        self.telemetry_start = self._telemetry()
        # the baseline every energy figure of the run sits on (one second)
        if self.build == 0:
            self.idle_power_w = idle_power_w(self.energy)
        # cases whose first build (an earlier process) was skipped write no row again
        else:
            self.skipped.update(skipped_in(self.csv_path))
        self.writer = ResultsWriter(self.results_dir, self.run_id, resume=self.build > 0)
        if self.build == 0:
            self.write_env()

    def _telemetry(self) -> dict[str, Any]:
        return gpu_telemetry(self.device.index or 0) if self.device.type == "cuda" else {}

    def base_row(self) -> dict[str, Any]:
        """The columns every row of the run shares: its fingerprint, schema, run id and profile."""
        return fingerprint_columns(self.env, self.run_id, str(self.profile))

    def record(self, row: dict[str, Any]) -> None:
        assert self.writer is not None, "record() before open()"
        self.writer.append(row)

    def write_env(self, end: dict[str, Any] | None = None) -> Path:
        energy = {
            "source": self.energy.counter.source if self.energy.counter else None,
            "note": self.energy.note,
            "idle_power_w": self.idle_power_w,
        }
        return write_sidecar(
            self.results_dir,
            self.run_id,
            "env",
            {
                "fingerprint": self.env,
                "gpu_telemetry_start": self.telemetry_start,
                "gpu_telemetry_end": end or {},
                "energy": energy,
            },
        )

    def store_top_ops(self, case_id: str, table: list[dict[str, Any]]) -> str:
        """Profiler tables go in one sidecar beside the CSV; the row names the file."""
        self.top_ops[case_id] = table
        return write_sidecar(self.results_dir, self.run_id, "ops", self.top_ops).name

    def close(self) -> None:
        """The first build's process describes the run's end too; the writer is closed."""
        if self.writer is None:
            return
        try:
            if self.build == 0 and not self.closed:
                self.write_env(self._telemetry())
        except ResultsFull:
            # the plugin stops the run with its line and exit 75
            raise
        # no descriptor left (ulimit -n), a folder swapped for a link: one line
        except OSError as error:
            self.stop = self.stop or RunStop(
                f"{self.run_id}.env.json not written ({error.strerror or error}); "
                f"{self.rows_kept} rows kept in {self.csv_path} — fix that, then re-run",
                4,
            )
        finally:
            self.writer.close()
            self.closed = True

    @property
    def rows_kept(self) -> int:
        return self.writer.rows_kept if self.writer is not None else 0


def skipped_in(csv_path: Path) -> dict[str, str]:
    """case_id -> reason for the skipped rows already in a run's file."""
    if not csv_path.exists():
        return {}
    return {
        row["case_id"]: row["reason"] for row in read_rows(csv_path) if row["status"] == "skipped"
    }
