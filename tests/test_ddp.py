import sys

import pytest
import torch
import torch.multiprocessing as mp

import ddp_equivalence
from harness.workloads import ddp
from harness.workloads.data_source import DataSource
from harness.workloads.ddp import DistributedCase, NprocError, check_nproc, launch, torchrun_command

CPU = torch.device("cpu")


def test_two_gloo_processes_match_one_process_on_the_combined_batch(tmp_path):
    out = tmp_path / "params.pt"
    mp.spawn(ddp_equivalence.rank_main, args=(2, ddp_equivalence.free_port(), str(out)), nprocs=2, join=True)
    distributed = torch.load(out)
    for a, b in zip(ddp_equivalence.single_process_params(), distributed):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)  # float reduction order differs across ranks


def test_more_processes_than_gpus_is_refused_before_launch(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(NprocError, match="--nproc 1 or fewer"):
        check_nproc(4, torch.device("cuda", 0))
    with pytest.raises(NprocError):
        check_nproc(0, CPU)
    assert check_nproc(2, CPU) == 2


def ctx(tmp_path, nproc: int = 2, rows=None):
    from harness.runner import BuildContext
    from harness.timing import SyncedClock

    source = DataSource("synthetic", tmp_path)
    return BuildContext(CPU, "smoke", SyncedClock(CPU), nproc, data_source=lambda: source, run_rows=rows if rows is not None else [])


def test_cases_compare_one_process_with_n_and_list_dataparallel(tmp_path):
    cases = ddp.cases(ctx(tmp_path))
    assert [(c.parallel, c.world_size, c.backend) for c in cases] == [("ddp", 1, "gloo"), ("ddp", 2, "gloo"), ("dataparallel", 2, "single-process")]


def test_dataparallel_needs_two_gpus(tmp_path):
    from harness.cases import CaseSkipped

    with pytest.raises(CaseSkipped, match="two or more GPUs"):
        ddp.build(DistributedCase("dataparallel", 2, "single-process", 8), ctx(tmp_path))


def data(tmp_path) -> DataSource:
    return DataSource("synthetic", tmp_path)


def test_torchrun_launch_reports_rank0_figures(tmp_path):
    case = DistributedCase("ddp", 2, "gloo", 16)
    report = launch(torchrun_command(case, CPU, data(tmp_path), max_steps=2, result_json=tmp_path / "r.json"), tmp_path / "r.json")
    assert report["world_size"] == 2 and report["steps"] == 2 and report["samples"] == 2 * 2 * 16
    assert report["backend"] == "gloo" and len(report["step_samples_s"]) == 2


def test_a_failing_rank_fails_the_case_with_its_error(tmp_path):
    case = DistributedCase("ddp", 2, "gloo", 16)
    command = torchrun_command(case, CPU, data(tmp_path), max_steps=2, result_json=tmp_path / "r.json")
    command = [arg if not arg.startswith("--batch-size") else "--batch-size=not-a-number" for arg in command]
    with pytest.raises(RuntimeError, match=r"torchrun exited 1: .*error: argument --batch-size: invalid int value"):
        launch(command, tmp_path / "r.json")
    assert not (tmp_path / "r.json").exists()


def test_scaling_baseline_comes_from_this_runs_rows():
    rows = [{"workload": "ddp", "status": "ok", "parallel": "ddp", "world_size": 1, "backend": "gloo", "batch_size": 8, "samples_per_s": 100.0},
            {"workload": "ddp", "status": "ok", "parallel": "ddp", "world_size": 1, "backend": "nccl", "batch_size": 8, "samples_per_s": 900.0}]
    assert ddp.single_process_samples_per_s(DistributedCase("ddp", 2, "gloo", 8), rows) == 100.0
    assert ddp.single_process_samples_per_s(DistributedCase("ddp", 2, "gloo", 16), rows) is None


def test_scaling_efficiency_is_present_when_only_the_two_process_case_runs(tmp_path):
    """-k selects only world_size=2: no baseline row exists, so the case measures one process itself."""
    from harness.stats import summarize

    timed = ddp.build(DistributedCase("ddp", 2, "gloo", 16), ctx(tmp_path, rows=[]))
    try:
        report = timed.fn()
        figures = timed.figures(summarize(timed.windows(report)), report)
    finally:
        timed.cleanup()
    assert figures["scaling_efficiency"] > 0  # its value depends on the machine's load; above 1.05 the row says impossible
    assert "one process measured for this case" in figures["reason"]


def test_an_impossible_scaling_efficiency_is_flagged(tmp_path):
    from harness.stats import summarize

    rows = [{"workload": "ddp", "status": "ok", "parallel": "ddp", "world_size": 1, "backend": "gloo", "batch_size": 16, "samples_per_s": 1.0}]
    timed = ddp.build(DistributedCase("ddp", 2, "gloo", 16), ctx(tmp_path, rows=rows))
    report = {"samples": 1000, "train_s": 1.0, "step_samples_s": [0.1, 0.1], "dataset": "synthetic", "peak_mem_bytes": 0}
    figures = timed.figures(summarize([0.1, 0.1]), report)
    timed.cleanup()
    assert figures["scaling_efficiency"] == 500.0 and "impossible: scaling efficiency" in figures["reason"]


def test_standalone_torchrun_worker_writes_its_own_row(tmp_path):
    """The README's multi-node recipe: the worker under torchrun, rank 0 appending a results row."""
    import subprocess

    from harness.results import read_rows

    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           "-m", "harness.workloads.ddp_worker", "--device-type=cpu", "--dataset=synthetic",
                           f"--data-root={tmp_path}", "--batch-size=16", "--max-steps=3", f"--results-dir={tmp_path / 'out'}"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (csv_path,) = (tmp_path / "out").glob("*.csv")
    (row,) = read_rows(csv_path)
    assert (row["workload"], row["world_size"], row["backend"], row["status"]) == ("ddp", 2, "gloo", "ok")
    assert row["samples_per_s"] > 0 and len(row["samples_s"]) == 3
    # the same id as the suite's case, so a standalone row and a suite row compare
    assert row["case_id"] == DistributedCase("ddp", 2, "gloo", 16).case_id == "ddp/ddp-x2-gloo-bs16"


def test_rank_error_is_the_root_cause_not_torchrun():
    output = "\n".join(["Traceback (most recent call last):", "  File x", "ValueError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!",
                         "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", "  traceback : To enable traceback see: https://x"])
    assert ddp.rank_error(output) == "ValueError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!"
    assert ddp.rank_error("nothing useful") == "no error line in the ranks' output"


MULTI_NODE_LIMIT_S = 90  # two agents and two ranks importing torch on a 2-core machine take ~30 s


def test_two_torchrun_agents_on_one_host_form_one_job(tmp_path):
    """The README's multi-node recipe with both nodes on this host: two torchrun agents meet through
    the c10d rendezvous, both succeed, and rank 0 writes one row for world_size 2."""
    import os
    import subprocess
    import time
    from pathlib import Path

    from harness.results import read_rows
    from harness.workloads.ddp import kill_launch

    try:
        port = ddp_equivalence.free_port()
    except OSError as error:
        pytest.skip(f"cannot bind a local port for the rendezvous: {error}")
    repo = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")])))
    logs = [tmp_path / f"node{node}.log" for node in (0, 1)]

    def agent(node: int) -> subprocess.Popen:
        with open(logs[node], "w") as log:
            return subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes=2", f"--node_rank={node}", "--nproc_per_node=1",
                                     "--rdzv_backend=c10d", f"--rdzv_endpoint=127.0.0.1:{port}",
                                     "-m", "harness.workloads.ddp_worker", "--device-type=cpu", "--dataset=synthetic", f"--data-root={tmp_path}",
                                     "--batch-size=16", "--max-steps=2", f"--results-dir={tmp_path / 'out'}"],
                                    stdout=log, stderr=subprocess.STDOUT, cwd=repo, env=env, start_new_session=True)

    agents = [agent(0), agent(1)]
    deadline = time.monotonic() + MULTI_NODE_LIMIT_S
    try:
        for proc in agents:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pytest.skip(f"two torchrun agents took longer than {MULTI_NODE_LIMIT_S} s on this machine")
    finally:
        for proc in agents:
            if proc.poll() is None:
                kill_launch(proc)
                proc.wait()
    output = "\n".join(log.read_text() for log in logs)
    if "address already in use" in output.lower():
        pytest.skip(f"rendezvous port {port} was taken by another process")
    assert [proc.returncode for proc in agents] == [0, 0], output[-3000:]
    (csv_path,) = (tmp_path / "out").glob("*.csv")
    (row,) = read_rows(csv_path)
    assert (row["workload"], row["world_size"], row["backend"], row["status"]) == ("ddp", 2, "gloo", "ok")
    assert row["case_id"] == "ddp/ddp-x2-gloo-bs16" and len(row["samples_s"]) == 2
