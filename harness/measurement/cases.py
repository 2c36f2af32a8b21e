"""Cases are frozen dataclasses: identity is data.

A case's fields are its settings; they become the pytest id, the CSV's setting columns and the
report's axes, so nothing downstream ever parses a test name.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar

from gpubench.harness.catalog import short_id


@dataclass(frozen=True)
class Case:
    """Base of every case. Subclasses set `workload` and declare their settings as fields, each
    named after its CSV column (gpubench.harness.records.schema.CASE_COLUMNS); a setting the case does not use is
    None. Ids come from its workload's declared rule (gpubench.harness.catalog)."""

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
    """Raised by a workload's build step when this device cannot run the case; becomes a
    `status=skipped` row with the message as its reason."""


class Diverged(Exception):
    """Raised by a workload's figures when training diverged: the row is `failed`, never fastest.
    `columns` still land in the row (e.g. the target a run did not reach)."""

    prefix = "diverged"

    def __init__(self, message: str, columns: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.columns = columns or {}


class DidNotConverge(Diverged):
    """A run that never reached its target accuracy within its cap: `failed`, counted as slowest."""

    prefix = "did not converge"
