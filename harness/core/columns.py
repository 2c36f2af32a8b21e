"""A results column: name, type, unit and group (torch-free: the schema and workload declarations
both use it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# json: raw samples; object: a flat JSON object
Kind = Literal["str", "int", "float", "bool", "json", "object"]
Group = Literal["run", "case", "measurement", "figure"]


@dataclass(frozen=True)
class Column:
    name: str
    kind: Kind
    group: Group
    # s, bytes, TFLOP/s, GB/s, samples/s, frac, ...; "" when unitless
    unit: str = ""
    # a file without it is not a gpubench results file
    required: bool = False


def _cols(
    group: Group, kind: Kind, names: str, unit: str = "", required: str = ""
) -> tuple[Column, ...]:
    needed = set(required.split())
    return tuple(Column(n, kind, group, unit, n in needed) for n in names.split())
