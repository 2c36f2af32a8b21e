"""The results store: the machine folder's name, --store resolved on the machine that runs, and
`gpubench report`/`compare` reading a store (CSVs one level down)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpubench.harness.commands.cli import build_parser, main
from gpubench.harness.commands.common import resolve_store
from gpubench.harness.devices.env import machine_identity
from gpubench.harness.records.results_reader import read_rows
from gpubench.harness.records.store import find_run, machine_folder_name, results_dir_for, runs_in
from gpubench.harness.core.exits import UsageError

IDENTITY = {"hostname": "gpu-node07.cluster", "cpu_model": "AMD EPYC 9654", "cpu_cores": 192, "ram_gib": 1536,
            "gpus": "NVIDIA H200,NVIDIA H200"}


def test_machine_folder_is_the_host_and_a_hash_of_the_hardware_only():
    name = machine_folder_name(IDENTITY)
    assert name.startswith("gpu-node07.cluster-") and len(name.rsplit("-", 1)[1]) == 8
    # what changes without the machine changing
    assert machine_folder_name(dict(IDENTITY, kernel="6.1", torch="2.14")) == name
    assert machine_folder_name(dict(IDENTITY, gpus="NVIDIA H200")) != name  # a GPU fewer is another machine
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
    assert results_dir_for(tmp_path, "results", "results", lambda: IDENTITY) == tmp_path / machine_folder_name(IDENTITY)


def test_a_store_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "store").write_text("")
    with pytest.raises(UsageError, match="not a folder"):
        results_dir_for(tmp_path / "store", "results", "results", lambda: IDENTITY)


def test_run_store_option_becomes_this_machines_folder(tmp_path):
    args, _ = build_parser().parse_known_args(["run", "--store", str(tmp_path)])
    assert resolve_store(args) is None
    assert Path(args.results_dir) == tmp_path / machine_folder_name(machine_identity()) and args.store is None


def test_runs_in_and_find_run_look_one_level_down(tmp_path):
    for machine, run in (("a-1", "r1"), ("a-1", "r2"), ("b-2", "r3")):
        (tmp_path / machine).mkdir(exist_ok=True)
        (tmp_path / machine / f"{run}.csv").write_text("x\n")
    (tmp_path / "reports" / "f1").mkdir(parents=True)
    (tmp_path / "reports" / "f1" / "merged.csv").write_text("x\n")  # a fleet report is not a run
    assert {m: [p.stem for p in ps] for m, ps in runs_in(tmp_path).items()} == {"a-1": ["r1", "r2"], "b-2": ["r3"]}
    assert find_run(tmp_path, "r3") == tmp_path / "b-2" / "r3.csv" and find_run(tmp_path, "r9") is None


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpubench.harness.commands.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600, check=False)


@pytest.mark.process
def test_run_into_a_store_then_report_and_compare_read_it(tmp_path, capsys, monkeypatch):
    """Two real smoke runs (one case each) into a store; report reads the store folder, compare
    the machine folder against a run's file (those two, and the refused third run, in this process:
    the runs are what needs processes)."""
    store = tmp_path / "store"
    for run_id in ("first", "second"):
        done = cli(
            "run", "--profile", "smoke", "--device", "cpu", "--store", str(store), "--run-id", run_id, "--no-report",
            "-k", "matmul and fp32", cwd=tmp_path
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    machine = store / machine_folder_name(machine_identity())
    assert sorted(p.name for p in machine.iterdir()) == ["first.csv", "first.env.json", "first.exit.json", "second.csv",
                                                         "second.env.json", "second.exit.json"]
    assert {row["run_id"] for row in read_rows(machine / "first.csv")} == {"first"}
    monkeypatch.chdir(tmp_path)
    assert main(["report", str(store), "--out", str(tmp_path / "report")]) == 0, capsys.readouterr().err
    merged = read_rows(tmp_path / "report" / "merged.csv")
    assert {row["run_id"] for row in merged} == {"first", "second"}
    capsys.readouterr()
    compared = main(["compare", str(machine / "first.csv"), str(machine / "second.csv"), "--threshold", "900%"])
    # 0 or 1 (slower): on a shared CPU one smoke run can be 1000x slower than the other; this checks compare reads the
    # store
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
                (tmp_path / f"{args.run_id}.csv").write_text("rows\n")
            return code

        monkeypatch.setattr(run_command, "cmd_run", fake_cmd_run)
        args, extra = build_parser().parse_known_args(["run", "--results-dir", str(tmp_path), "--run-id", "r"])
        assert run_command.run_from_args(args, extra) == code
        return json.loads((tmp_path / "r.exit.json").read_text())["exit_code"]

    assert run(0, makes_csv=True) == 0  # the run that made r.csv records how it ended
    assert run(4, makes_csv=False) == 0  # the refused one, whose id was taken, leaves it
