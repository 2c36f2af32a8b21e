"""pytest-benchmark's view of a case is one entry. A case's builds are separate pytest items (`-b0`,
`-b1`: the budget plan runs every case's first build before any repeat), and pytest-benchmark keeps
one entry per item: its table held a row per build, sorted apart, and `--benchmark-compare` matched
builds. Here a case's first timed build is its entry, named without the build's suffix (name,
fullname, param, params), and each later build's samples join it while the later build's own entry
leaves pytest-benchmark's session, so its table, JSON, compare, group-by and histogram see cases.
The pytest items keep their ids (`-k`, pytest's own lines)."""

from __future__ import annotations

import statistics
from typing import Any

import pytest
from pytest_benchmark.stats import Stats

# the plugin's parameter that makes a case's builds separate items
BUILD_PARAM = "gpubench_build"


# each case's entry (its `Metadata`) by its fullname (no build suffix)
ENTRIES = pytest.StashKey[dict[str, Any]]()


def add_build(entry: Any, build: int, samples_s: list[float], merge: bool) -> None:
    """Build `build`'s samples: already the entry's (its first build), or added to them
    (`merge`)."""
    # Stats caches what it computed: a fresh one over every sample
    if merge:
        merged = Stats()
        for seconds in [*entry.stats.data, *samples_s]:
            merged.update(seconds)
        entry.stats = merged
    # the row's figures there are the first build's; these say which builds the samples are
    entry.extra_info.setdefault("build_medians_s", {})[f"b{build}"] = statistics.median(samples_s)


def enter_build(
    config: pytest.Config,
    benchmark: Any,
    build: int,
    samples_s: list[float],
    test_id: str | None,
    own: bool,
) -> None:
    """A build whose row is ok, into its case's entry. `own`: pytest-benchmark's fixture timed it,
    and its entry is `benchmark.stats`; else the harness timed it later in the same test
    (measure()'s later builds), with no entry of its own. `test_id`: the case's id in the item's,
    before `-b<k>`."""
    metadata = getattr(benchmark, "stats", None)
    if metadata is None or not samples_s:
        return
    entries = config.stash.setdefault(ENTRIES, {})
    if not own:
        if entries.get(metadata.fullname) is metadata:
            add_build(metadata, build, samples_s, merge=True)
        return
    names = case_names(metadata, test_id, build)
    entry = entries.get(names.get("fullname", metadata.fullname))
    if entry is None:
        for attribute, value in names.items():
            setattr(metadata, attribute, value)
        entries[metadata.fullname] = metadata
        add_build(metadata, build, samples_s, merge=False)
    elif leave_session(config, metadata):
        add_build(entry, build, samples_s, merge=True)


def case_names(metadata: Any, test_id: str | None, build: int) -> dict[str, Any]:
    """The entry's names without the build: `test_matmul[fp32-n512-b1]` -> `test_matmul[fp32-n512]`,
    and its params without the build's; nothing for an entry the plugin did not parametrize."""
    params = metadata.params
    if not isinstance(params, dict) or BUILD_PARAM not in params:
        return {}
    names: dict[str, Any] = {
        "params": {key: value for key, value in params.items() if key != BUILD_PARAM}
    }
    param, tagged = metadata.param or "", f"{test_id}-b{build}"
    # one build: no suffix
    if test_id is None or tagged not in param:
        return names
    case_param = param.replace(tagged, test_id, 1)
    names.update(
        param=case_param,
        name=retag(metadata.name, param, case_param),
        fullname=retag(metadata.fullname, param, case_param),
    )
    return names


def retag(text: str, param: str, case_param: str) -> str:
    """`...[param]` -> `...[case_param]` (pytest ends an item's name and id with its parameters'
    id)."""
    suffix = f"[{param}]"
    return text[: -len(suffix)] + f"[{case_param}]" if text.endswith(suffix) else text


def leave_session(config: pytest.Config, metadata: Any) -> bool:
    """Takes a later build's entry out of pytest-benchmark's session. Its fixture appended the entry
    to the session's `benchmarks`, the list its table, JSON and compare read; pytest-benchmark
    registers the session as the plugin named "pytest-benchmark" (4.0 to 5.x), pytest's public way
    to reach a plugin. Where it is not so, False: the build stays an entry of its own, named by its
    item, as before."""
    session = config.pluginmanager.get_plugin("pytest-benchmark")
    benchmarks = getattr(session, "benchmarks", None)
    if not isinstance(benchmarks, list):
        return False
    for index, entry in enumerate(benchmarks):
        # by identity: Metadata has no equality of its own
        if entry is metadata:
            del benchmarks[index]
            return True
    return False
