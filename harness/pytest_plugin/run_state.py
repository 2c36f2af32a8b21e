"""What one gpubench pytest session holds: the records, the build context template, the training
data (loaded once, released after each case) and the untimed-case count."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.budget.plan import BudgetPlan
from gpubench.harness.devices.data_source import DataSource
from gpubench.harness.measurement.run_records import RunRecords

if TYPE_CHECKING:
    from gpubench.harness.devices.machine_load import LoadMeter, Look


@dataclass
class RunState:
    ctx: BuildContext
    records: RunRecords
    data_root: Path
    dataset: str
    profile_ops: bool
    # this process runs one build of each case (gpubench run)
    only_build: int | None = None
    # that build is past the profile's (gpubench.harness.pytest_plugin.extra_build)
    extra_build: bool = False
    # case id -> its builds, though one build is collected
    case_builds: dict[str, int] = field(default_factory=dict)
    # case ids whose figures are rows of the report's summary
    headline: set[str] = field(default_factory=set)
    # --budget: the whole run's seconds (None: no limit)
    budget_s: float | None = None
    # the run's end (wall clock), computed once: gpubench run's, else this run's start plus its
    # budget; None: no budget
    deadline_s: float | None = None
    # made once the selection is known
    budget_plan: BudgetPlan | None = None
    # the run's end (wall clock) past which, and a grace, a test still running is cut: gpubench
    # run's deadline, or the start plus a --budget the user gave; None (a plain pytest run under the
    # profile's default budget): never cut
    end_s: float | None = None
    untimed_cases: int = 0
    # started at set-up: the look before the first case spans the collection
    load_meter: LoadMeter | None = None
    # what it saw, once the selection is known
    look: Look | None = None
    # --threads: the user's count stays, busy or not
    threads_given: bool = False
    # torch threads before and after following the free cores
    threads_moved: tuple[int, int] | None = None
    # the session clock before this run's, restored at unconfigure (pytester)
    previous_clock: Any = None
    _data: DataSource | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.ctx.data_source = self.data
        self.ctx.run_rows = []

    def data(self) -> DataSource:
        if self._data is None:
            self._data = DataSource(
                self.dataset, self.data_root, self.profile_ops, self.records.store_top_ops
            )
        return self._data

    def release_device_data(self) -> None:
        """A dataset left on the device would count in the next case's peak memory."""
        if self._data is not None:
            self._data.release()

    def context(self, build: int) -> BuildContext:
        """The build's context; its run_rows list is the session's (shared, not copied)."""
        return replace(self.ctx, build_index=build)
