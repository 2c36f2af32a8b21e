"""A link refused in one place is refused in every other: the folder a run, a fleet or a store
writes into is never a symbolic link, said in one line naming the fix (exit 4 for run, 2 for fleet),
and nothing lands in the link's target — not the run's exit record either."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubench.harness.commands.cli import main
from gpubench.harness.core.exits import UsageError
from gpubench.harness.records.store import results_dir_for, write_exit

IDENTITY = {
    "hostname": "node07",
    "cpu_model": "Xeon",
    "cpu_cores": 64,
    "ram_gib": 512,
    "gpus": "NVIDIA H200",
}
SMOKE_CASE = [
    "--device",
    "cpu",
    "--profile",
    "smoke",
    "-k",
    "matmul and fp32 and n64",
    "--no-report",
]


def linked_folder(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """(the link, the folder it points at, empty)."""
    target = tmp_path / f"{name}-target"
    target.mkdir()
    link = tmp_path / name
    link.symlink_to(target)
    return link, target


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("given", [True, False], ids=["results-dir", "default-results"])
def test_a_linked_results_folder_is_refused_before_any_build_and_nothing_is_written_through_it(
    tmp_path, monkeypatch, capfd, given
):
    link, target = linked_folder(tmp_path, "results")
    # the default --results-dir is ./results: a link planted in a shared folder
    monkeypatch.chdir(tmp_path)
    where = ["--results-dir", str(link), "--run-id", "r1"] if given else ["--run-id", "r1"]
    assert main(["run", *SMOKE_CASE, *where]) == 4
    line = one_error_line(capfd.readouterr().err)
    assert "is a symbolic link" in line and "pass --results-dir with the folder itself" in line
    assert list(target.iterdir()) == []


def test_the_exit_record_is_never_written_through_a_linked_folder(tmp_path):
    link, target = linked_folder(tmp_path, "results")
    for made_csv in (False, True, None):
        said = write_exit(link, "r1", 4, made_csv=made_csv)
        assert said is not None and "is a symbolic link" in said
    assert list(target.iterdir()) == []


def test_a_linked_store_is_refused_naming_store(tmp_path, capsys):
    link, target = linked_folder(tmp_path, "store")
    with pytest.raises(
        UsageError, match=r"--store .*store is a symbolic link .* — pass --store with the folder"
    ):
        results_dir_for(link, "results", "results", lambda: IDENTITY)
    assert main(["run", *SMOKE_CASE, "--store", str(link)]) == 4
    assert "--store" in one_error_line(capsys.readouterr().err)
    assert list(target.iterdir()) == []


@pytest.mark.parametrize("linked", ["store", "jobs"])
def test_a_fleet_refuses_a_linked_store_or_jobs_folder_before_submitting(tmp_path, capfd, linked):
    link, target = linked_folder(tmp_path, linked)
    folders = {"store": str(tmp_path / "store"), "jobs": str(tmp_path / "jobs"), linked: str(link)}
    assert (
        main(
            [
                "fleet",
                "--store",
                folders["store"],
                "--jobs-dir",
                folders["jobs"],
                "--target",
                "name=a",
                "--device",
                "cpu",
                "-k",
                "matches_no_case",
            ]
        )
        == 2
    )
    line = one_error_line(capfd.readouterr().err)
    assert f"pass --{'jobs-dir' if linked == 'jobs' else 'store'} with the folder itself" in line
    assert list(target.iterdir()) == []
