"""A results column: name, type, unit and group (torch-free: the schema and workload declarations both use it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["str", "int", "float", "bool", "json", "object"]  # json: raw samples; object: a flat JSON object
Group = Literal["run", "case", "measurement", "figure"]


@dataclass(frozen=True)
class Column:
    name: str
    kind: Kind
    group: Group
    unit: str = ""  # s, bytes, TFLOP/s, GB/s, samples/s, frac, ...; "" when unitless
    required: bool = False  # a file without it is not a gpubench results file


def _cols(group: Group, kind: Kind, names: str, unit: str = "", required: str = "") -> tuple[Column, ...]:
    needed = set(required.split())
    return tuple(Column(n, kind, group, unit, n in needed) for n in names.split())
