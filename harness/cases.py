"""Cases are frozen dataclasses: identity is data.

A case's fields are its settings; they become the pytest id, the CSV's setting columns and the
report's axes, so nothing downstream ever parses a test name.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar

from harness.caseids import short_id
from harness.timing import Budget

PROFILES = ("quick", "full", "smoke")
PROFILE_HELP = "quick (default; minutes on a 2-core CPU), full (every size and setting), smoke (tiny; tests the suite itself, figures meaningless)"


class ProfileError(ValueError):
    pass


def check_profile(name: str) -> str:
    if name not in PROFILES:
        raise ProfileError(f"unknown profile {name!r}: use --profile quick, full or smoke")
    return name


# Seconds of timed work per build of a micro-benchmark case, per profile (quick: 3 builds, full: 7;
# see harness.runner.DEFAULT_BUILDS). Many short builds beat few long ones: on a shared machine a
# case's speed can change from one build to the next (fresh tensors, another moment of the run),
# and that spread is what a comparison must be judged against.
BUDGETS: dict[str, Budget] = {
    "smoke": Budget(target_s=0.05, min_rounds=3, max_rounds=5, warmup_calls=1),
    "quick": Budget(target_s=0.1, min_rounds=5, max_rounds=100, warmup_calls=2),
    "full": Budget(target_s=0.3, min_rounds=10, max_rounds=500, warmup_calls=3),
}


@dataclass(frozen=True)
class Case:
    """Base of every case. Subclasses set `workload` and declare their settings as fields, each
    named after its CSV column (harness.schema.CASE_COLUMNS); a setting the case does not use is
    None. Ids come from the one scheme in harness.caseids."""

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
