"""A user's own benchmark (`gpubench.measure(step, name="mymodel/train", params=..., work=...)`) as
a one-case workload run like every case of the suite. Parameters go in `params`, unnamed figures in
`user_figures`; `work` per call gives samples_per_s, tflops, gbps, or `<unit>_per_s` in
user_figures."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable, Mapping

from gpubench.harness.catalog import spec_for
from gpubench.harness.catalog.profiles import Profile
from gpubench.harness.core.stats import SampleStats
from gpubench.harness.core.workload_spec import IdRule, WorkloadSpec
from gpubench.harness.measurement.cases import Case
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.measurement.measure import Timed
from gpubench.harness.measurement.workload import Workload
from gpubench.harness.core.exits import UsageError

Figures = Callable[[SampleStats, Any], Mapping[str, float]]

# A name's parts: letters, digits and . _ - (no spaces, no commas): they become the case id and
# file-safe labels
NAME = re.compile(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*", re.ASCII)
KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*", re.ASCII)
# work per call -> the schema's own figure and its scale; any other unit is `<unit>_per_s` in
# user_figures
CORE_RATES = {"samples": ("samples_per_s", 1.0), "flops": ("tflops", 1e12), "bytes": ("gbps", 1e9)}


@dataclass(frozen=True)
class UserCase(Case):
    """One user case: `name` up to the first "/" is its workload; its settings are the one `params`
    column."""

    name: str
    params: tuple[tuple[str, Any], ...]

    @property  # type: ignore[override]  # per case here, where the suite's cases name it per class
    def workload(self) -> str:
        return self.name.split("/", 1)[0]

    def settings(self) -> dict[str, Any]:
        return {"params": dict(self.params) or None}

    @property
    def test_id(self) -> str:
        params = [f"{key}={value}" for key, value in self.params]
        return "-".join(filter(None, [self.name.partition("/")[2], *params])) or "defaults"


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise UsageError(
            f"name {name!r}: use parts of letters, digits, '.', '_' or '-' joined by '/', "
            'such as name="mymodel/train"'
        )
    group = name.split("/", 1)[0]
    if spec_for(group) is not None:
        raise UsageError(
            f"name {name!r}: {group!r} is one of gpubench's own workloads — start the name with "
            'your own, such as "mymodel/..."'
        )
    return name


def check_params(params: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    """Sorted (key, value) pairs; values are text, whole numbers, finite floats, booleans or
    None."""
    if params is None:
        return ()
    if not isinstance(params, Mapping):
        raise UsageError(f'params {params!r}: pass a dict such as params={{"batch": 64}}')
    for key, value in params.items():
        if not isinstance(key, str) or not KEY.fullmatch(key):
            raise UsageError(
                f"params key {key!r}: use a name of letters, digits, '_', '.' or '-', "
                'such as "batch"'
            )
        finite = not isinstance(value, float) or math.isfinite(value)
        if not (value is None or isinstance(value, (str, bool, int, float))) or not finite:
            raise UsageError(f"params[{key!r}] = {value!r}: use text, a number, a boolean or None")
    return tuple(sorted(params.items()))


def check_work(work: Mapping[str, float] | None) -> dict[str, float]:
    """Units of work one call does, each a positive finite number: {"samples": 64}."""
    checked: dict[str, float] = {}
    for unit, amount in (work or {}).items():
        if not isinstance(unit, str) or not KEY.fullmatch(unit):
            raise UsageError(f'work unit {unit!r}: use a name such as "samples" or "tokens"')
        if (
            isinstance(amount, bool)
            or not isinstance(amount, (int, float))
            or not 0 < amount < math.inf
        ):
            raise UsageError(
                f"work[{unit!r}] = {amount!r}: give the positive amount one call does, such as 64"
            )
        checked[unit] = float(amount)
    return checked


def rate_figures(work: dict[str, float], stats: SampleStats) -> dict[str, Any]:
    """Throughput per unit of work from the median time of one call; user units go in
    user_figures."""
    figures: dict[str, Any] = {}
    extra: dict[str, float] = {}
    for unit, amount in work.items():
        column, scale = CORE_RATES.get(unit, (None, 1.0))
        rate = amount / stats.median_s / scale
        if column is None:
            extra[f"{unit}_per_s"] = rate
        else:
            figures[column] = rate
    if extra:
        figures["user_figures"] = extra
    return figures


def own_figures(figures: Figures | None, stats: SampleStats, result: Any) -> dict[str, float]:
    """The user's figures from the statistics and the last call's result: finite numbers by name."""
    if figures is None:
        return {}
    values = dict(figures(stats, result))
    for key, value in values.items():
        if not isinstance(key, str) or not KEY.fullmatch(key):
            raise UsageError(f'figure name {key!r}: use a name such as "loss" or "tokens_per_s"')
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise UsageError(f"figure {key!r} = {value!r}: a figure is a finite number")
    return {key: float(value) for key, value in values.items()}


def user_timed(fn: Callable[[], Any], work: dict[str, float], figures: Figures | None) -> Timed:
    def derive(stats: SampleStats, result: Any) -> dict[str, Any]:
        out = rate_figures(work, stats)
        mine = own_figures(figures, stats, result)
        if mine:
            out["user_figures"] = {**out.get("user_figures", {}), **mine}
        return out

    return Timed(fn=fn, figures=derive)


def user_workload(
    name: str,
    params: Mapping[str, Any] | None,
    make_fn: Callable[[], Callable[[], Any]],
    work: Mapping[str, float] | None,
    figures: Figures | None,
    builds: int,
) -> tuple[UserCase, Workload]:
    """The case and its workload; `make_fn` (untimed, once per build) returns the callable to
    time."""
    case = UserCase(check_name(name), check_params(params))
    checked_work = check_work(work)
    if not isinstance(builds, int) or isinstance(builds, bool) or builds < 1:
        raise UsageError(f"builds={builds!r}: pass a whole number of builds, 1 or more")

    def set_up(case: UserCase, ctx: BuildContext) -> Timed:
        fn = make_fn()
        if not callable(fn):
            raise UsageError(f"setup returned {fn!r}, not a callable — return the function to time")
        return user_timed(fn, checked_work, figures)

    spec = WorkloadSpec(
        case.workload, IdRule(()), builds={str(profile): builds for profile in Profile}
    )
    return case, Workload(spec, lambda ctx: [case], set_up)
