"""What `gpubench compare` must not let pass unsaid: a case BASE measured that NEW's run budget held
back (too slow now to fit its share: the worst slowdown, unmeasured), sides run with different torch
threads, and a raced case whose race picked another setting on each side. Real CSVs through the
command, as a user runs it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpubench.harness.commands.cli import main
from gpubench.harness.records.results import ResultsWriter
from gpubench.harness.records.schema import SCHEMA_VERSION

CASES = ("matmul/fp32-n64", "matmul/fp32-n128")
RACED = "mnist_epoch/preloaded-raced"
OVER_BUDGET = (
    "over budget: one call takes 2.0 s; its share of the 3m budget is 0.3 s — raise --budget or "
    "deselect it"
)
STOPPED = (
    "stopped by its budget share after 30 s at 80.1% (target 85%) — raise --budget to reach it"
)


def row(run_id: str, case_id: str, build: int, **cells: Any) -> dict[str, Any]:
    """One row of a CPU run; `cells` override (status, reason, torch_threads, raced settings)."""
    workload = case_id.split("/")[0]
    median_s = 1e-3 * (1 + build / 100) * (2 if case_id.endswith("128") else 1)
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "timestamp_utc": "2026-01-01T12:00:00+00:00",
        "profile": "quick",
        "machine_id": "m",
        "hostname": "h",
        "device": "cpu",
        "device_name": "cpu",
        "cpu_model": "x",
        "cpu_cores": 8,
        "ram_bytes": 8 * 2**30,
        "torch_version": "2.9.0",
        "torch_threads": 8,
        "workload": workload,
        "case_id": case_id,
        "build": build,
        "median_s": median_s,
        "samples_s": [median_s] * 5,
        "status": "ok",
        **cells,
    }


def write(folder: Path, run_id: str, rows: list[dict[str, Any]]) -> Path:
    writer = ResultsWriter(folder, run_id)
    for one in rows:
        writer.append(one)
    writer.close()
    return folder / f"{run_id}.csv"


def measured(run_id: str, cases: tuple[str, ...] = CASES, **cells: Any) -> list[dict[str, Any]]:
    return [row(run_id, case_id, build, **cells) for case_id in cases for build in range(3)]


def compare(
    tmp_path: Path, capsys: Any, base: list[dict[str, Any]], new: list[dict[str, Any]]
) -> tuple[int, str]:
    code = main(["compare", str(write(tmp_path, "base", base)), str(write(tmp_path, "new", new))])
    return code, capsys.readouterr().out


def test_a_case_new_skipped_over_its_budget_share_fails_the_comparison(tmp_path, capsys):
    # measured in BASE, too slow in NEW to fit its share: it read "only in BASE" and compare exited
    # 0
    held_back = row(
        "new",
        CASES[1],
        0,
        status="skipped",
        reason=OVER_BUDGET,
        flags="over-budget",
        median_s=None,
        samples_s=None,
    )
    code, out = compare(
        tmp_path, capsys, measured("base"), measured("new", CASES[:1]) + [held_back]
    )
    assert code == 1, out
    assert f"broken (untried in NEW: {OVER_BUDGET})" in out and "only in BASE" not in out


def test_a_run_to_target_new_stopped_at_its_budget_share_fails_the_comparison(tmp_path, capsys):
    stopped = row(
        "new",
        CASES[1],
        0,
        status="unreached",
        stopped_by="budget",
        reason=STOPPED,
        median_s=None,
        samples_s=None,
    )
    code, out = compare(tmp_path, capsys, measured("base"), measured("new", CASES[:1]) + [stopped])
    assert code == 1, out
    assert f"broken (unreached in NEW: {STOPPED})" in out and "only in BASE" not in out


def test_sides_run_with_different_torch_threads_are_said_to_differ_in_configuration(
    tmp_path, capsys
):
    code, out = compare(tmp_path, capsys, measured("base"), measured("new", torch_threads=4))
    assert code == 0, out
    assert (
        "note: the sides ran with different torch threads (BASE 8; NEW 4): a different thread "
        "count is a different configuration, and the verdicts judge it with the code"
    ) in out


def test_a_raced_case_whose_race_picked_another_setting_on_each_side_is_said_so(tmp_path, capsys):
    raced = {"raced": True, "precision": "fp32", "channels_last": False}
    base = measured("base") + measured("base", (RACED,), **raced)
    new = measured("new") + measured(
        "new", (RACED,), **{**raced, "precision": "bf16", "channels_last": True}
    )
    code, out = compare(tmp_path, capsys, base, new)
    assert code == 0, out
    assert (
        f"note: {RACED}: the epoch race picked fp32 in BASE, bf16 channels_last in NEW: its "
        "verdict compares the races' winners too"
    ) in out
    (tmp_path / "same").mkdir()
    code, out = compare(
        tmp_path / "same", capsys, base, measured("new") + measured("new", (RACED,), **raced)
    )
    # the same winner: nothing to say
    assert "epoch race picked" not in out


def one_build(run_id: str, case_id: str, slower: float = 1.0, **cells: Any) -> dict[str, Any]:
    """One build whose one sample cannot give a spread: compare can only call the case
    inconclusive."""
    median_s = 1e-3 * slower
    return row(run_id, case_id, 0, median_s=median_s, samples_s=[median_s], **cells)


def test_a_case_that_reads_slower_only_with_new_rows_busy_exits_6(tmp_path, capsys):
    base = [one_build("base", case) for case in CASES]
    new = [one_build("new", CASES[0], 3.35, flags="busy"), one_build("new", CASES[1])]
    code, out = compare(tmp_path, capsys, base, new)
    assert code == 6, out
    assert "cannot judge: busy (reads x3.35, undecided; NEW rows flagged busy" in out
    (tmp_path / "quiet").mkdir()
    quiet = [one_build("new", CASES[0], 3.35), one_build("new", CASES[1])]
    code, out = compare(tmp_path / "quiet", capsys, base, quiet)
    # undecided without a load to blame: inconclusive, as before
    assert code == 0 and "cannot judge" not in out


EPOCH = {
    "model": "cnn",
    "batch_size": 256,
    "dataset": "fashion-mnist",
    "loader": "preloaded",
    "precision": "bf16",
    "channels_last": True,
    "compile_mode": "none",
}


def test_a_setting_renamed_across_versions_is_compared_as_one_case_and_said_so(tmp_path, capsys):
    base = measured("base") + measured(
        "base", ("mnist_epoch/preloaded-bf16-cl",), raced=False, **EPOCH
    )
    new = measured("new") + measured("new", ("mnist_epoch/preloaded-raced",), raced=True, **EPOCH)
    code, out = compare(tmp_path, capsys, base, new)
    assert code == 0, out
    assert (
        "note: BASE's mnist_epoch/preloaded-bf16-cl is NEW's mnist_epoch/preloaded-raced (the "
        "same settings under another case id): compared as one case"
    ) in out
    assert "only in" not in out and "| mnist_epoch/preloaded-raced |" in out
    (tmp_path / "fp32").mkdir()
    code, out = compare(
        tmp_path / "fp32",
        capsys,
        base,
        measured("new")
        + measured(
            "new", ("mnist_epoch/preloaded-raced",), raced=True, **{**EPOCH, "precision": "fp32"}
        ),
    )
    # another setting: never mapped
    assert "only in BASE (1): mnist_epoch/preloaded-bf16-cl" in out
