"""What every workload's `cases` and `set_up` receive: the one BuildContext of a build process."""

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
    """Everything a build needs: device, profile, the build's synced clock (every figure's), data
    and options."""

    device: torch.device
    profile: Profile
    clock: SyncedClock
    nproc: int = 1
    data_source: Callable[[], DataSource] | None = None
    # rows already written in this run
    run_rows: list[dict[str, Any]] = field(default_factory=list)
    # long cases report (done, total) here
    progress: Callable[[int, int], None] | None = None
    # joules over each timed region
    energy: EnergyMeter = field(default_factory=lambda: EnergyMeter(None))
    # GPU clocks/temperature/power/throttling during each region
    telemetry: TelemetrySampler | None = None
    # --target-accuracy (None: the dataset's default)
    target_accuracy: float | None = None
    # which independent build is running (a time-to-accuracy run's seed)
    build_index: int = 0
    # --builds: every case's build count (None: the workload's for the profile)
    builds: int | None = None
    # --build-seconds: the timed seconds of a micro-benchmark build
    build_seconds: float | None = None
    # --build-calls: the timed calls of a micro-benchmark build, at least
    build_calls: int | None = None
    # pytest-benchmark's --benchmark-min-rounds: a micro-benchmark build's, at least
    min_rounds: int | None = None
    # this build's share of the run budget (--budget); None: no budget
    share: CaseShare | None = None
    # --model and --input: the user's model the `model` workload times
    model: ModelSpec | None = None
    # where the run's files go: the epoch race keeps its winner there
    results_dir: Path | None = None
    # the fingerprint's machine id, read when first needed
    machine_id: Callable[[], str] = lambda: ""
    # a case's own timed seconds (gpubench ab's file)
    case_build_s: dict[str, float] = field(default_factory=dict)

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
            timing = replace(
                timing,
                min_rounds=max(timing.min_rounds, self.min_rounds),
                max_rounds=max(timing.max_rounds, self.min_rounds),
            )
        return timing if self.build_calls is None else replace(timing, min_calls=self.build_calls)

    def timing_for(self, case_id: str) -> BuildTiming:
        """The build timing of one case: its own timed seconds where an `ab` session chose them."""
        own_s = self.case_build_s.get(case_id)
        return self.timing if own_s is None else replace(self.timing, target_s=own_s)

    def builds_of(self, workload: Any) -> int:
        return self.builds if self.builds is not None else workload.builds(self.profile)
