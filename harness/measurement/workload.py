"""A workload: its torch-free declaration and its measurement. Each harness/workloads module ends
with `WORKLOAD = Workload(SPEC, cases, set_up)`, and may add for budgeted runs `headline` (the cases
of the report's summary, funded first) and `work` (one call's work, for the cost model)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from collections.abc import Callable

from gpubench.harness.catalog import spec_for
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.measurement.measure import Timed
from gpubench.harness.catalog.profiles import Profile
from gpubench.harness.budget.cost_model import Work
from gpubench.harness.core.workload_spec import IdRule, WorkloadSpec

# undeclared work: one small call, so the build is about the profile's rounds
MICRO_WORK = Work()


@dataclass(frozen=True)
class Workload:
    spec: WorkloadSpec
    cases: Callable[[BuildContext], list[Any]]
    set_up: Callable[[Any, BuildContext], Timed]
    headline: Callable[[list[Any]], list[Any]] = lambda cases: []
    work: Callable[[Any, BuildContext], Work] = lambda case, ctx: MICRO_WORK

    def builds(self, profile: str) -> int:
        """Independent builds per case in this profile (the workload's own count, else the
        profile's)."""
        if self.spec.builds is not None:
            return int(self.spec.builds[str(profile)])
        return Profile(profile).default_builds


def as_workload(obj: Any) -> Workload:
    """A bench module's `gpubench_workload`: a Workload, or a module with `cases` and `set_up` (and
    optional `BUILDS`/`MARKERS` as in WorkloadSpec)."""
    if isinstance(obj, Workload):
        return obj
    name = (
        getattr(obj, "WORKLOAD_NAME", None)
        or str(getattr(obj, "__name__", type(obj).__name__)).rsplit(".", 1)[-1]
    )
    spec = spec_for(name) or WorkloadSpec(
        name, IdRule(()), getattr(obj, "BUILDS", None), tuple(getattr(obj, "MARKERS", ()))
    )
    return Workload(
        spec,
        getattr(obj, "cases", lambda ctx: []),
        obj.set_up,
        getattr(obj, "headline", lambda cases: []),
        getattr(obj, "work", lambda case, ctx: MICRO_WORK),
    )
