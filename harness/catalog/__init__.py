"""The workload catalogue: one torch-free `SPEC` (a WorkloadSpec) per module. Whatever must know a
workload without running it (case ids, schema columns, headlines, report sections) asks here."""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from typing import Any
from collections.abc import Mapping

from gpubench.harness.core.columns import Column
from gpubench.harness.core.workload_spec import WorkloadSpec


@lru_cache(maxsize=1)
def specs() -> dict[str, WorkloadSpec]:
    found: dict[str, WorkloadSpec] = {}
    for module in pkgutil.iter_modules(__path__):
        spec = getattr(importlib.import_module(f"{__name__}.{module.name}"), "SPEC", None)
        if isinstance(spec, WorkloadSpec):
            if spec.name in found:
                raise RuntimeError(f"two catalogue modules declare the workload {spec.name!r}")
            found[spec.name] = spec
    return dict(sorted(found.items()))


def spec_for(workload: str) -> WorkloadSpec | None:
    return specs().get(workload)


def declared_columns() -> tuple[Column, ...]:
    """Columns workloads add to the results schema, each once (two workloads may share one)."""
    seen: dict[str, Column] = {}
    for spec in specs().values():
        for column in spec.columns:
            if seen.setdefault(column.name, column) != column:
                raise RuntimeError(f"column {column.name!r} is declared twice with different types")
    return tuple(seen.values())


def short_id(workload: str, settings: Mapping[str, Any]) -> str:
    """The case id after `workload/`; an undeclared workload names every used setting as
    name=value."""
    spec = spec_for(workload)
    if spec is None:
        return "-".join(f"{k}={v}" for k, v in settings.items() if v is not None) or "defaults"
    return spec.id_rule.short_id(settings)


def case_id_for(workload: str, settings: Mapping[str, Any]) -> str:
    return f"{workload}/{short_id(workload, settings)}"
