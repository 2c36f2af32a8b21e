"""What every workload's `cases` and `build` receive: the one BuildContext of a session."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from collections.abc import Callable

import torch

from gpubench.harness.devices.data_source import DataSource
from gpubench.harness.devices.energy import EnergyMeter, TelemetrySampler
from gpubench.harness.core.model_spec import ModelSpec
from gpubench.harness.core.plan import BuildTiming
from gpubench.harness.budget.shares import CaseShare
from gpubench.harness.catalog.profiles import Profile
from gpubench.harness.measurement.timing import SyncedClock


@dataclass
class BuildContext:
    """Everything a build needs: device, profile, the session's synced clock (every figure's), data and options."""

    device: torch.device
    profile: Profile
    clock: SyncedClock
    nproc: int = 1
    data_source: Callable[[], DataSource] | None = None
    run_rows: list[dict[str, Any]] = field(default_factory=list)  # rows already written in this run
    progress: Callable[[int, int], None] | None = None  # long cases report (done, total) here
    energy: EnergyMeter = field(default_factory=lambda: EnergyMeter(None))  # joules over each timed region
    telemetry: TelemetrySampler | None = None  # GPU clocks/temperature/power/throttling during each region
    target_accuracy: float | None = None  # --target-accuracy (None: the dataset's default)
    build_index: int = 0  # which independent build is running (a time-to-accuracy run's seed)
    builds: int | None = None  # --builds: every case's build count (None: the workload's for the profile)
    build_seconds: float | None = None  # --build-seconds: the timed seconds of a micro-benchmark build
    build_calls: int | None = None  # --build-calls: the timed calls of a micro-benchmark build, at least
    min_rounds: int | None = None  # pytest-benchmark's --benchmark-min-rounds: a micro-benchmark build's, at least
    share: CaseShare | None = None  # this build's share of the run budget (--budget); None: no budget
    model: ModelSpec | None = None  # --model and --input: the user's model the `model` workload times
    results_dir: Path | None = None  # where the run's files go: the epoch race keeps its winner there
    machine_id: Callable[[], str] = lambda: ""  # the fingerprint's machine id, read when first needed
    case_build_s: dict[str, float] = field(default_factory=dict)  # a case's own timed seconds (gpubench ab's file)

    @property
    def data(self) -> DataSource:
        if self.data_source is None:
            raise RuntimeError("this workload needs training data but the context has none")
        return self.data_source()

    @property
    def timing(self) -> BuildTiming:
        timing = Profile(self.profile).timing
        if self.build_seconds is not None:
            timing = replace(timing, target_s=self.build_seconds)
        if self.min_rounds is not None:
            timing = replace(timing, min_rounds=max(timing.min_rounds, self.min_rounds),
                             max_rounds=max(timing.max_rounds, self.min_rounds))
        return timing if self.build_calls is None else replace(timing, min_calls=self.build_calls)

    def timing_for(self, case_id: str) -> BuildTiming:
        """The build timing of one case: its own timed seconds where the session chose them."""
        own_s = self.case_build_s.get(case_id)
        return self.timing if own_s is None else replace(self.timing, target_s=own_s)

    def builds_of(self, workload: Any) -> int:
        return self.builds if self.builds is not None else workload.builds(self.profile)
