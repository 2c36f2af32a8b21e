"""What `gpubench run` shows and leaves when its build processes end: one pytest-benchmark table for
the whole run, a build process killed (kill -9, the out-of-memory killer) named with the rows kept,
and a closed terminal (SIGHUP) leaving no scratch or DDP folder and a written environment sidecar."""

import json
import os
import re
import signal
import time

import psutil
import pytest
from runs import cmdlines, gpubench_run

from harness.launch import signal_death
from harness.results import count_rows, read_rows


def test_a_two_build_run_prints_one_benchmark_table(tmp_path):
    proc = gpubench_run(tmp_path, "--builds", "2", "-k", "matmul and fp32", "--no-report", "--run-id", "two")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    assert len(re.findall(r"^-+ benchmark 'matmul': 2 tests -+$", out, re.MULTILINE)) == 1, out[-3000:]
    assert len(re.findall(r"^Name \(time in", out, re.MULTILINE)) == 1  # one header for the run, not one per build
    assert "test_matmul[fp32-n64-b0]" in out and "test_matmul[fp32-n64-b1]" in out
    assert sorted(p.name for p in (tmp_path / "res").iterdir()) == ["two.csv", "two.env.json"]  # the builds' JSON stayed in the scratch folder


def test_a_build_process_killed_with_sigkill_is_named_with_the_rows_kept(tmp_path):
    proc = gpubench_run(tmp_path, "--builds", "3", "-k", "matmul or elementwise", "--run-id", "killed")
    csv_path = tmp_path / "res" / "killed.csv"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None and not (csv_path.exists() and count_rows(csv_path) >= 1):
        time.sleep(0.1)
    (build,) = [child for child in psutil.Process(proc.pid).children() if "pytest" in " ".join(child.cmdline())]
    build.kill()  # as kill -9, or the kernel's out-of-memory killer under a memory cap
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGKILL, err[-2000:]
    lines = [line for line in err.splitlines() if line.startswith("gpubench:")]
    assert len(lines) == 1 and re.fullmatch(
        rf"gpubench: build [123] of 3 was killed by SIGKILL \(kill -9, or the kernel's out-of-memory killer .*\): "
        rf"{count_rows(csv_path)} rows kept in {re.escape(str(csv_path))} \(each whole\); the case in progress was not recorded .*", lines[0]), lines
    assert all(row["status"] for row in read_rows(csv_path))  # each row whole
    assert "report ->" not in out  # no report of a run that died


def test_signal_deaths_are_named_from_either_form_of_exit_code():
    assert signal_death(-9).startswith("SIGKILL (") and signal_death(137) == signal_death(-9)
    assert signal_death(134).startswith("SIGABRT (") and "memory cap" in signal_death(-6)
    assert signal_death(1) == "" and signal_death(0) == "" and signal_death(75) == ""


def test_sighup_to_gpubench_run_during_a_ddp_case_leaves_no_folder_and_writes_the_sidecar(tmp_path):
    """The terminal closed while torchrun runs: the build process unwinds the case (its workdir
    removed), closes its session, and gpubench run removes its scratch folder: exit 129."""
    (tmp_path / "tmp").mkdir()
    proc = gpubench_run(tmp_path, "--dataset", "synthetic", "-k", "ddp-x1", "--run-id", "hup", "--no-report",
                        env=dict(os.environ, TMPDIR=str(tmp_path / "tmp")))  # the scratch and DDP folders go there
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if any("--nproc_per_node=1" in line for line in cmdlines(psutil.Process(proc.pid).children(recursive=True))):
            break
        time.sleep(0.2)
    else:
        pytest.fail(f"the DDP launch never started: {proc.communicate()[1][-2000:]}")
    assert list((tmp_path / "tmp").glob("gpubench-ddp-*")) and list((tmp_path / "tmp").glob("gpubench-run-*"))
    proc.send_signal(signal.SIGHUP)  # to gpubench run only: it passes it on to its build process
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 128 + signal.SIGHUP, err[-2000:]
    assert err.strip().splitlines()[-1].startswith("gpubench: interrupted: 0 rows kept in"), err[-2000:]
    assert "Traceback" not in out + err
    assert not list((tmp_path / "tmp").glob("gpubench-*"))  # no scratch (gpubench-run-*) or DDP (gpubench-ddp-*) folder left
    sidecar = json.loads((tmp_path / "res" / "hup.env.json").read_text())
    assert sidecar["fingerprint"]
