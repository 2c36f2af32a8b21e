"""What docs/validation/campaign-team-store.md found and fixed beyond the classes of its own tests
(test_run_ownership, test_contradicting_rows, test_report_memory)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from gpubench.harness.core.exits import UsageError
from gpubench.reports.judge.load import load_results

from runs import GPUBENCH

HEADLINE = Path(__file__).resolve().parent.parent / "reports" / "examples" / "h200" / "headline.csv"


def test_a_raw_samples_cell_past_csvs_field_limit_is_read(tmp_path):
    """300,000 samples (2.4 MB of text, past csv's 128 KiB field limit) in one row: a measurement,
    read."""
    rows = pd.read_csv(HEADLINE)
    median_s = float(rows.loc[0, "median_s"])
    rows.loc[0, "samples_s"] = json.dumps([median_s] * 300_000)
    rows.to_csv(tmp_path / "run.csv", index=False)
    frame = load_results([tmp_path / "run.csv"], [], [])
    assert len(frame) == len(rows) and len(json.loads(frame.loc[0, "samples_s"])) == 300_000


@pytest.mark.process
def test_a_report_draws_whatever_mplbackend_another_program_set(tmp_path):
    """MPLBACKEND=nonsense stopped matplotlib's import with a traceback, exit 1; the report draws
    with Agg."""
    import os
    import subprocess

    env = dict(os.environ, MPLBACKEND="nonsense", MPLCONFIGDIR=str(tmp_path / "mpl"))
    done = subprocess.run(
        [
            *GPUBENCH,
            "report",
            str(HEADLINE),
            "--out",
            str(tmp_path / "out"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-500:]
    assert "Traceback" not in done.stderr and (tmp_path / "out" / "report.md").is_file()
    assert any(p.suffix == ".png" for p in (tmp_path / "out").iterdir())


def test_a_model_in_a_module_named_in_another_script_is_read():
    """Python names modules and functions in any script (`str.isidentifier`): --model
    módulo_ñ:fábrica is one."""
    from gpubench.harness.core.model_spec import ModelSpec, parse_model_options

    assert parse_model_options("módulo_ñ:fábrica", "4") == ModelSpec("módulo_ñ", "fábrica", (4,))
    for bad in ("a-b:f", "1a:f", "a:f()", "a..b:f", "a: f"):
        try:
            parse_model_options(bad, "4")
        except UsageError as error:
            assert "name a factory as module:function" in str(error)
        else:
            raise AssertionError(f"{bad} read as a factory")
