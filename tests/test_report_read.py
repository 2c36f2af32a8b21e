"""What a reader found reading a whole report end to end (docs/validation/report-read.md): each place where one part
of the report said what another part refuted."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubench.reports.build import build_report

# These tests read the report's text, not its pixels (conftest.unrendered_plots).
pytestmark = pytest.mark.usefixtures("unrendered_plots")

EXAMPLES = Path(__file__).resolve().parent.parent / "reports" / "examples"
QUICK, FULL = EXAMPLES / "cpu-2core-quick.csv", EXAMPLES / "cpu-2core-tta-full.csv"


def section_text(report: str, title: str) -> str:
    return report.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_a_machine_whose_runs_differ_in_a_field_shows_every_value_of_it(tmp_path: Path) -> None:
    """Machines once took each machine's first row: 'Alike on every machine: … profile quick' while Before and after
    said 'the sides differ in profiles (BASE quick; NEW full)'."""
    text = build_report([QUICK, FULL], tmp_path / "report", None).read_text(encoding="utf-8")
    assert "BASE quick; NEW full" in section_text(text, "Before and after")
    machines = section_text(text, "Machines")
    assert "profile quick, full" in machines
    assert "profile quick." not in machines
