"""The results store: the machine folder's name, --store resolved on the machine that runs, and
`gpubench report`/`compare` reading a store (CSVs one level down)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from store_runs import runs_in

from gpubench.harness.commands.cli import build_parser, main
from gpubench.harness.commands.common import read_options, resolve_store
from gpubench.harness.devices.env import machine_identity
from gpubench.harness.records.results_reader import read_rows
from gpubench.harness.records.store import find_run, machine_folder_name, results_dir_for
from gpubench.harness.core.exits import UsageError

IDENTITY = {
    "hostname": "gpu-node07.cluster",
    "cpu_model": "AMD EPYC 9654",
    "cpu_cores": 192,
    "ram_gib": 1536,
    "gpus": "NVIDIA H200,NVIDIA H200",
}


def test_machine_folder_is_the_host_and_a_hash_of_the_hardware_only():
    name = machine_folder_name(IDENTITY)
    assert name.startswith("gpu-node07.cluster-") and len(name.rsplit("-", 1)[1]) == 8
    # what changes without the machine changing
    assert machine_folder_name(dict(IDENTITY, kernel="6.1", torch="2.14")) == name
    # a GPU fewer is another machine
    assert machine_folder_name(dict(IDENTITY, gpus="NVIDIA H200")) != name
    assert machine_folder_name(dict(IDENTITY, ram_gib=768)) != name


def test_machine_folder_is_safe_on_any_file_system():
    name = machine_folder_name(dict(IDENTITY, hostname="../we ird/host:1"))
    assert "/" not in name and " " not in name and ":" not in name and not name.startswith(".")


def test_this_machines_identity_is_stable():
    assert machine_folder_name(machine_identity()) == machine_folder_name(machine_identity())


def test_store_and_results_dir_together_are_refused(tmp_path):
    with pytest.raises(UsageError, match="pass one of them"):
        results_dir_for(tmp_path, "elsewhere", "results", lambda: IDENTITY)
    assert results_dir_for(None, "elsewhere", "results", lambda: IDENTITY) == Path("elsewhere")
    assert results_dir_for(
        tmp_path, "results", "results", lambda: IDENTITY
    ) == tmp_path / machine_folder_name(IDENTITY)


def test_a_store_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "store").write_text("")
    with pytest.raises(UsageError, match="not a folder"):
        results_dir_for(tmp_path / "store", "results", "results", lambda: IDENTITY)


def test_run_store_option_becomes_this_machines_folder(tmp_path):
    args, _ = build_parser().parse_known_args(["run", "--store", str(tmp_path)])
    args.run = read_options(args)
    resolve_store(args)
    assert (
        Path(args.run.results_dir) == tmp_path / machine_folder_name(machine_identity())
        and args.run.store is None
    )


def test_runs_in_and_find_run_look_one_level_down(tmp_path):
    for machine, run in (("a-1", "r1"), ("a-1", "r2"), ("b-2", "r3")):
        (tmp_path / machine).mkdir(exist_ok=True)
        (tmp_path / machine / f"{run}.csv").write_text("x\n")
    (tmp_path / "reports" / "f1").mkdir(parents=True)
    # a fleet report is not a run
    (tmp_path / "reports" / "f1" / "merged.csv").write_text("x\n")
    assert {m: [p.stem for p in ps] for m, ps in runs_in(tmp_path).items()} == {
        "a-1": ["r1", "r2"],
        "b-2": ["r3"],
    }
    assert (
        find_run(tmp_path, "r3").csv == tmp_path / "b-2" / "r3.csv"
        and find_run(tmp_path, "r9").csv is None
    )


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpubench.harness.commands.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.process
def test_run_into_a_store_then_report_and_compare_read_it(tmp_path, capsys, monkeypatch):
    """Two real smoke runs (one case each) into a store; report reads the store folder, compare
    the machine folder against a run's file (those two, and the refused third run, in this process:
    the runs are what needs processes)."""
    store = tmp_path / "store"
    for run_id in ("first", "second"):
        done = cli(
            "run",
            "--profile",
            "smoke",
            "--device",
            "cpu",
            "--store",
            str(store),
            "--run-id",
            run_id,
            "--no-report",
            "-k",
            "matmul and fp32",
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    machine = store / machine_folder_name(machine_identity())
    assert sorted(p.name for p in machine.iterdir()) == [
        "first.csv",
        "first.env.json",
        "first.exit.json",
        "second.csv",
        "second.env.json",
        "second.exit.json",
    ]
    assert {row["run_id"] for row in read_rows(machine / "first.csv")} == {"first"}
    monkeypatch.chdir(tmp_path)
    assert main(["report", str(store), "--out", str(tmp_path / "report")]) == 0, (
        capsys.readouterr().err
    )
    merged = read_rows(tmp_path / "report" / "merged.csv")
    assert {row["run_id"] for row in merged} == {"first", "second"}
    capsys.readouterr()
    compared = main(
        ["compare", str(machine / "first.csv"), str(machine / "second.csv"), "--threshold", "900%"]
    )
    # 0 or 1 (slower): on a shared CPU one smoke run can be 1000x slower than the other; this checks
    # compare reads the store
    out = capsys.readouterr().out
    assert compared in (0, 1) and "matmul/fp32-n64" in out, out
    both = main(["run", "--store", str(store), "--results-dir", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert both == 4 and err.count("\n") == 1 and "pass one of them" in err


def test_a_run_refused_for_a_taken_id_leaves_the_first_runs_exit_record(tmp_path, monkeypatch):
    """A second `gpubench run --run-id r` is refused (exit 4) and must not replace r's own record of
    exit 0: a fleet reading it would call a finished job failed."""
    from gpubench.harness.commands import run_command

    def run(code: int, makes_csv: bool):
        def fake_cmd_run(args, extra):
            if makes_csv:
                (tmp_path / f"{args.run.run_id}.csv").write_text("rows\n")
            # as run_builds sets it from its builds' answers
            args.rows_written = int(makes_csv)
            return code

        monkeypatch.setattr(run_command, "cmd_run", fake_cmd_run)
        args, extra = build_parser().parse_known_args(
            ["run", "--results-dir", str(tmp_path), "--run-id", "r"]
        )
        assert run_command.run_from_args(args, extra) == code
        return json.loads((tmp_path / "r.exit.json").read_text())["exit_code"]

    # the run that made r.csv records how it ended
    assert run(0, makes_csv=True) == 0
    # the refused one, whose id was taken, leaves it
    assert run(4, makes_csv=False) == 0


def csv_in(folder: Path, run_id: str, mode: int = 0o644) -> Path:
    """`<folder>/<run_id>.csv` as a run leaves it (the user's own, 0644 unless `mode` says
    otherwise)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{run_id}.csv"
    path.write_text("x\n")
    path.chmod(mode)
    return path


def test_find_run_adopts_no_csv_others_can_write_even_in_a_folder_that_sorts_first(tmp_path):
    # a member of the team's store made "0-theirs" (first in sort order) and a <run id>.csv there
    # anyone can rewrite
    mine = csv_in(tmp_path / "node-b", "F-t")
    planted = csv_in(tmp_path / "0-theirs", "F-t", mode=0o666)
    found = find_run(tmp_path, "F-t")
    assert found.csv == mine
    assert (
        len(found.ignored) == 1
        and str(planted) in found.ignored[0]
        and "writable by others" in found.ignored[0]
    )


def test_two_csvs_of_one_run_are_told_apart_by_the_exit_record_beside_one_or_neither_is_adopted(
    tmp_path,
):
    from gpubench.harness.records.store import write_exit

    first, second = csv_in(tmp_path / "a-1", "r"), csv_in(tmp_path / "b-2", "r")
    # nothing tells which one the run wrote: not the one that sorts first
    found = find_run(tmp_path, "r")
    assert found.csv is None and len(found.ignored) == 1
    assert (
        str(first) in found.ignored[0]
        and str(second) in found.ignored[0]
        and "move" in found.ignored[0]
    )
    # the run recorded its end beside its CSV
    assert write_exit(second.parent, "r", 0, made_csv=True) is None
    found = find_run(tmp_path, "r")
    assert found.csv == second and len(found.ignored) == 1 and str(first) in found.ignored[0]


def test_an_exit_record_is_written_only_by_the_run_that_made_the_csv_or_where_there_is_none(
    tmp_path,
):
    """Two runs with one run id start together: both found the id free; the loser's build could not
    create the CSV (another run meanwhile) and it ends 4. Its record must neither replace the
    winner's nor claim its CSV."""
    from gpubench.harness.records.store import write_exit

    csv_in(tmp_path, "r")
    assert write_exit(tmp_path, "r", 4, made_csv=False) is None
    # the CSV is another run's: its end is its own to record
    assert not (tmp_path / "r.exit.json").exists()
    assert write_exit(tmp_path, "r", 0, made_csv=True) is None
    # the loser ending after the winner
    assert write_exit(tmp_path, "r", 4, made_csv=False) is None
    assert json.loads((tmp_path / "r.exit.json").read_text())["exit_code"] == 0
    # a run refused before any case made no CSV: it records its end, but never over another run's
    # record
    assert write_exit(tmp_path, "q", 4, made_csv=False) is None
    assert write_exit(tmp_path, "q", 5, made_csv=False) is None
    assert json.loads((tmp_path / "q.exit.json").read_text())["exit_code"] == 4
    # ... and the run that then made q.csv has the last word on q
    csv_in(tmp_path, "q")
    assert write_exit(tmp_path, "q", 0, made_csv=True) is None
    assert json.loads((tmp_path / "q.exit.json").read_text())["exit_code"] == 0


def test_two_runs_given_one_run_id_at_once_the_loser_leaves_the_winners_exit_record(
    tmp_path, monkeypatch
):
    """Both found r.csv free before their builds; the winner's build made it and the run recorded
    exit 0; the loser's build was refused the file ("created by another run meanwhile") and the run
    ended 4 after: its record replaced the winner's 0, and a fleet called the finished job
    failed."""
    from gpubench.harness.commands import run_command
    from gpubench.harness.records.store import write_exit

    def loser(args, extra):
        # meanwhile, the winner's build made it, and the winner ended
        (tmp_path / "r.csv").write_text("rows\n")
        assert write_exit(tmp_path, "r", 0, made_csv=True) is None
        # as run_builds sets it: the loser's build wrote no row
        args.rows_written = 0
        return 4

    monkeypatch.setattr(run_command, "cmd_run", loser)
    args, extra = build_parser().parse_known_args(
        ["run", "--results-dir", str(tmp_path), "--run-id", "r"]
    )
    assert run_command.run_from_args(args, extra) == 4
    assert json.loads((tmp_path / "r.exit.json").read_text())["exit_code"] == 0
