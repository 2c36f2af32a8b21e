"""Cases are frozen dataclasses whose fields are their settings: the pytest id, the CSV's setting
columns and the report's axes come from them, so nothing downstream parses a test name."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar

from gpubench.harness.catalog import short_id


@dataclass(frozen=True)
class Case:
    """Base of every case: subclasses set `workload` and declare settings as fields named after
    their CSV columns (None where unused); ids follow the workload's declared rule."""

    workload: ClassVar[str] = ""

    def settings(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def test_id(self) -> str:
        return short_id(self.workload, self.settings())

    @property
    def case_id(self) -> str:
        return f"{self.workload}/{self.test_id}"


class CaseSkipped(Exception):
    """This device cannot run the case: a `skipped` row with the message as its reason."""


class Diverged(Exception):
    """Training diverged: the row is `failed`, never fastest; `columns` still land in it."""

    prefix = "diverged"

    def __init__(self, message: str, columns: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.columns = columns or {}


class Unreached(Exception):
    """A run stopped (by its budget share or its epoch cap) before its target: an `unreached` row
    that keeps what it measured (`columns`: the accuracy reached, the seconds and epochs trained)
    and never holds a time to target."""

    def __init__(self, message: str, columns: dict[str, Any]) -> None:
        super().__init__(message)
        self.columns = columns
