"""Distributed training: the DDP workload, its torchrun launch, and a rank that dies or hangs."""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ddp_equivalence
import pytest
import torch
import torch.multiprocessing as mp
from fakes import FakeBenchmark, RunContext, run_with
from runs import REPO, processes_of

from gpubench.harness.devices import device as devices
from gpubench.harness.measurement.cases import CaseSkipped
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.devices.data_source import DataSource
from gpubench.harness.core.exits import UsageError
from gpubench.harness.processes.lifetime import kill_tree as kill_launch
from gpubench.harness.devices.device import check_nproc, default_nproc
from gpubench.harness.records.results import ResultsWriter
from gpubench.harness.records.results_reader import read_rows
from gpubench.harness.core.bounds import past_bounds
from gpubench.harness.records.schema import SCHEMA_VERSION
from gpubench.harness.core.stats import summarize
from gpubench.harness.measurement.timing import SyncedClock
from gpubench.harness.workloads import ddp
from gpubench.harness.workloads.common import torchrun_launch
from gpubench.harness.workloads.common.torchrun_launch import (
    STALE_WORKDIR_S,
    launch,
    rank_error,
    root_cause,
    silent_rank,
    sweep_stale_workdirs,
)
from gpubench.harness.workloads.ddp import DistributedCase, ddp_command

CPU = torch.device("cpu")


@pytest.mark.process
def test_two_gloo_processes_match_one_process_on_the_combined_batch(tmp_path):
    out = tmp_path / "params.pt"
    mp.spawn(
        ddp_equivalence.rank_main,
        args=(2, ddp_equivalence.free_port(), str(out)),
        nprocs=2,
        join=True,
    )
    distributed = torch.load(out)
    for a, b in zip(ddp_equivalence.single_process_params(), distributed):
        # float reduction order differs across ranks
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_more_processes_than_gpus_is_refused_before_launch(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(UsageError, match="--nproc 1 or fewer"):
        check_nproc(4, torch.device("cuda", 0))
    with pytest.raises(UsageError):
        check_nproc(0, CPU)
    assert check_nproc(2, CPU) == 2


def ctx(tmp_path, nproc: int = 2, rows=None):
    source = DataSource("synthetic", tmp_path)
    return BuildContext(
        CPU,
        "smoke",
        SyncedClock(CPU),
        nproc,
        data_source=lambda: source,
        run_rows=rows if rows is not None else [],
    )


def test_cases_compare_one_process_with_n_and_list_dataparallel(tmp_path):
    cases = ddp.cases(ctx(tmp_path))
    assert [(c.parallel, c.world_size, c.backend) for c in cases] == [
        ("ddp", 1, "gloo"),
        ("ddp", 2, "gloo"),
        ("dataparallel", 2, "single-process"),
    ]


def test_dataparallel_needs_two_gpus(tmp_path):
    with pytest.raises(CaseSkipped, match="two or more GPUs"):
        ddp.set_up(DistributedCase("dataparallel", 2, "single-process", 8), ctx(tmp_path))


def data(tmp_path) -> DataSource:
    return DataSource("synthetic", tmp_path)


@pytest.mark.process
def test_torchrun_launch_reports_rank0_figures_and_leaves_its_scratch_in_the_workdir(
    tmp_path, monkeypatch
):
    case = DistributedCase("ddp", 2, "gloo", 16)
    shared, workdir = tmp_path / "shared-tmp", tmp_path / "workdir"
    shared.mkdir(), workdir.mkdir()
    # the shared /tmp: torchrun's torchelastic_* folders must not land there
    monkeypatch.setenv("TMPDIR", str(shared))
    report = launch(
        ddp_command(case, CPU, data(tmp_path), max_steps=2, result_json=workdir / "r.json"),
        workdir / "r.json",
    )
    assert report["world_size"] == 2 and report["steps"] == 2 and report["samples"] == 2 * 2 * 16
    assert report["backend"] == "gloo" and len(report["step_samples_s"]) == 2
    # removed with the workdir by the case's cleanup
    assert list(shared.iterdir()) == [] and list(workdir.glob("torchelastic_*"))


@pytest.mark.process
def test_a_failing_rank_fails_the_case_with_its_error(tmp_path):
    case = DistributedCase("ddp", 2, "gloo", 16)
    command = ddp_command(case, CPU, data(tmp_path), max_steps=2, result_json=tmp_path / "r.json")
    command = [
        arg if not arg.startswith("--batch-size") else "--batch-size=not-a-number"
        for arg in command
    ]
    with pytest.raises(
        RuntimeError, match=r"torchrun exited 1: .*error: argument --batch-size: invalid int value"
    ):
        launch(command, tmp_path / "r.json")
    assert not (tmp_path / "r.json").exists()


def test_scaling_baseline_comes_from_this_runs_rows():
    rows = [
        {
            "workload": "ddp",
            "status": "ok",
            "parallel": "ddp",
            "world_size": 1,
            "backend": "gloo",
            "batch_size": 8,
            "samples_per_s": 100.0,
        },
        {
            "workload": "ddp",
            "status": "ok",
            "parallel": "ddp",
            "world_size": 1,
            "backend": "nccl",
            "batch_size": 8,
            "samples_per_s": 900.0,
        },
    ]
    assert ddp.single_process_samples_per_s(DistributedCase("ddp", 2, "gloo", 8), rows) == 100.0
    assert ddp.single_process_samples_per_s(DistributedCase("ddp", 2, "gloo", 16), rows) is None


@pytest.mark.process
def test_scaling_efficiency_is_present_when_only_the_two_process_case_runs(tmp_path):
    """-k selects only world_size=2: no baseline row exists, so the case measures one process
    itself."""
    timed = ddp.set_up(DistributedCase("ddp", 2, "gloo", 16), ctx(tmp_path, rows=[]))
    try:
        report = timed.fn()
        figures = timed.figures(summarize(timed.windows(report)), report)
    finally:
        timed.cleanup()
    # its value depends on the machine's load; above 1.05 the row says impossible
    assert figures["scaling_efficiency"] > 0
    assert "one process measured for this case" in figures["reason"]


def test_an_impossible_scaling_efficiency_is_flagged(tmp_path):
    rows = [
        {
            "workload": "ddp",
            "status": "ok",
            "parallel": "ddp",
            "world_size": 1,
            "backend": "gloo",
            "batch_size": 16,
            "samples_per_s": 1.0,
        }
    ]
    timed = ddp.set_up(DistributedCase("ddp", 2, "gloo", 16), ctx(tmp_path, rows=rows))
    report = {
        "samples": 1000,
        "train_s": 1.0,
        "step_samples_s": [0.1, 0.1],
        "dataset": "synthetic",
        "peak_mem_bytes": 0,
    }
    figures = timed.figures(summarize([0.1, 0.1]), report)
    timed.cleanup()
    assert figures["scaling_efficiency"] == 500.0
    assert past_bounds(figures, "", "") == [
        "impossible: scaling efficiency 500.00 > 1.05 — another job shared "
        # the runner flags the row
        "the machine during one of the runs"
    ]


@pytest.mark.process
def test_standalone_torchrun_worker_writes_its_own_row(tmp_path):
    """The multi-node recipe (docs/usage.md): the worker under torchrun, rank 0 appending a results
    row."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            "-m",
            "gpubench.harness.workloads.ddp_worker",
            "--device-type=cpu",
            "--dataset=synthetic",
            f"--data-root={tmp_path}",
            "--batch-size=16",
            "--max-steps=3",
            f"--results-dir={tmp_path / 'out'}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (csv_path,) = (tmp_path / "out").glob("*.csv")
    (row,) = read_rows(csv_path)
    assert (row["workload"], row["world_size"], row["backend"], row["status"]) == (
        "ddp",
        2,
        "gloo",
        "ok",
    )
    assert row["samples_per_s"] > 0 and len(row["samples_s"]) == 3
    # the same id as the suite's case, so a standalone row and a suite row compare
    assert row["case_id"] == DistributedCase("ddp", 2, "gloo", 16).case_id == "ddp/ddp-x2-gloo-bs16"


def test_rank_error_is_the_root_cause_not_torchrun():
    output = "\n".join(
        [
            "Traceback (most recent call last):",
            "  File x",
            "ValueError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!",
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
            "  traceback : To enable traceback see: https://x",
        ]
    )
    assert (
        rank_error(output)
        == "ValueError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!"
    )
    assert rank_error("nothing useful") == "no error line in the ranks' output"


# Two agents and two ranks importing torch take ~10 s alone, ~30 s on a loaded 2-core machine. A
# rendezvous or a job that has not finished by then is hung: the test fails, with the agents' logs.
MULTI_NODE_LIMIT_S = 120


@pytest.mark.process
def test_two_torchrun_agents_on_one_host_form_one_job(tmp_path):
    """The multi-node recipe (docs/usage.md) with both nodes on this host: two torchrun agents meet
    through the c10d rendezvous, both succeed, and rank 0 writes one row for world_size 2. It skips
    only where this machine cannot host the rendezvous (no local port to bind, or another process
    took the port before the agents bound it); a hung or failed job fails it."""
    try:
        port = ddp_equivalence.free_port()
    except OSError as error:
        pytest.skip(
            "this machine cannot run the test: no local port can be bound for the rendezvous "
            f"({error})"
        )
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    )
    logs = [tmp_path / f"node{node}.log" for node in (0, 1)]

    def agent(node: int) -> subprocess.Popen:
        with open(logs[node], "w") as log:
            return subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "torch.distributed.run",
                    "--nnodes=2",
                    f"--node_rank={node}",
                    "--nproc_per_node=1",
                    "--rdzv_backend=c10d",
                    f"--rdzv_endpoint=127.0.0.1:{port}",
                    "-m",
                    "gpubench.harness.workloads.ddp_worker",
                    "--device-type=cpu",
                    "--dataset=synthetic",
                    f"--data-root={tmp_path}",
                    "--batch-size=16",
                    "--max-steps=2",
                    f"--results-dir={tmp_path / 'out'}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=REPO,
                env=env,
                start_new_session=True,
            )

    agents = [agent(0), agent(1)]
    deadline = time.monotonic() + MULTI_NODE_LIMIT_S
    hung = False
    try:
        for proc in agents:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        hung = True
    finally:
        for proc in agents:
            if proc.poll() is None:
                kill_launch(proc)
                proc.wait()
    output = "\n".join(log.read_text() for log in logs)
    assert not hung, (
        f"the two-agent job did not finish in {MULTI_NODE_LIMIT_S} s (killed): a hung rendezvous "
        f"or collective\n{output[-3000:]}"
    )
    if [proc.returncode for proc in agents] != [
        0,
        0,
    ] and "address already in use" in output.lower():
        pytest.skip(
            f"this machine cannot run the test now: rendezvous port {port} was taken by another "
            "process before the agents bound it"
        )
    assert [proc.returncode for proc in agents] == [0, 0], output[-3000:]
    (csv_path,) = (tmp_path / "out").glob("*.csv")
    (row,) = read_rows(csv_path)
    assert (row["workload"], row["world_size"], row["backend"], row["status"]) == (
        "ddp",
        2,
        "gloo",
        "ok",
    )
    assert row["case_id"] == "ddp/ddp-x2-gloo-bs16" and len(row["samples_s"]) == 2


# ---- more processes than the machine holds ---------------------------------------------------


def test_cpu_nproc_beyond_cores_or_memory_is_refused_before_launch(monkeypatch):
    monkeypatch.setattr(devices, "usable_cores", lambda: 2)
    monkeypatch.setattr(devices, "available_memory_bytes", lambda: 4_000_000_000)
    with pytest.raises(
        UsageError,
        match=r"--nproc 9 is more than 4 processes per core on the 2 cores this process "
        r"may use — use --nproc 8 or fewer",
    ):
        check_nproc(9, CPU)
    with pytest.raises(
        UsageError,
        match=r"--nproc 3 needs about 4\.5 GB \(1\.5 GB per process\) but 4\.0 GB is "
        r"available — use --nproc 2 or fewer",
    ):
        check_nproc(3, CPU)
    with pytest.raises(UsageError, match="positive"):
        check_nproc(0, CPU)
    assert check_nproc(2, CPU) == 2
    monkeypatch.setattr(devices, "available_memory_bytes", lambda: 2_000_000_000)
    # the default is never refused
    assert default_nproc(CPU) == 1 and check_nproc(default_nproc(CPU), CPU) == 1


# ---- a rank dies or hangs -------------------------------------------------------------------


@pytest.fixture
def faulty_rank(monkeypatch):
    """Rank 1 of the launches made meanwhile fails as asked: die, hang or stop
    (tests/faulty_ddp_worker.py)."""

    def make(fault: str) -> None:
        monkeypatch.setattr(ddp, "WORKER_MODULE", "tests.faulty_ddp_worker")
        monkeypatch.setenv("FAULTY_DDP", fault)
        monkeypatch.setenv("FAULTY_DDP_RANK", "1")

    return make


def launch_marked(tmp_path: Path) -> list[str]:
    """A two-rank torchrun command whose ranks carry tmp_path in their command line (to find
    them)."""
    case = DistributedCase("ddp", 2, "gloo", 16)
    return ddp_command(
        case, CPU, DataSource("synthetic", tmp_path), max_steps=2, result_json=tmp_path / "r.json"
    )


@pytest.mark.process
def test_a_rank_killed_by_sigkill_fails_the_case_naming_rank_and_signal(
    tmp_path, monkeypatch, faulty_rank
):
    """Through the runner: the failed row says which rank died how, and the workdir is removed."""
    faulty_rank("die")
    # the case's gpubench-ddp-* workdir goes here
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    source = DataSource("synthetic", tmp_path)
    writer = ResultsWriter(tmp_path, "run")
    bctx = BuildContext(CPU, "smoke", SyncedClock(CPU), 2, data_source=lambda: source)
    with pytest.raises(
        RuntimeError, match=r"torchrun exited 1: rank 1 exitcode -9 \(SIGKILL"
    ) as caught:
        run_with(
            DistributedCase("ddp", 2, "gloo", 16),
            ddp,
            FakeBenchmark(),
            RunContext(bctx, {"schema_version": SCHEMA_VERSION, "run_id": "r"}, writer),
        )
    writer.close()
    assert "\n" not in str(caught.value)
    (failed,) = read_rows(tmp_path / "run.csv")
    assert failed["status"] == "failed" and "rank 1 exitcode -9 (SIGKILL" in failed["reason"]
    # removed even though the case failed
    assert not list(tmp_path.glob("gpubench-ddp-*"))
    assert not processes_of(tmp_path)


@pytest.mark.process
def test_a_hung_rank_is_killed_with_the_whole_launch_at_the_timeout(
    tmp_path, monkeypatch, faulty_rank
):
    faulty_rank("hang")
    # The ranks' collective timeout far beyond the launch's: only the launch timeout can end this.
    command = [
        arg if not arg.startswith("--timeout-s=") else "--timeout-s=600"
        for arg in launch_marked(tmp_path)
    ]
    start = time.monotonic()
    with pytest.raises(
        RuntimeError, match=r"torchrun timed out after 15 s and was killed with its ranks"
    ):
        launch(command, tmp_path / "r.json", timeout_s=15)
    assert time.monotonic() - start < 15 + 20
    # SIGKILL is immediate, but the kernel reaps asynchronously
    deadline = time.monotonic() + 5
    while processes_of(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not processes_of(tmp_path), "a rank survived the launch timeout"


@pytest.mark.process
def test_a_hung_peer_fails_the_waiting_rank_at_the_collective_timeout(
    tmp_path, monkeypatch, faulty_rank
):
    """The worker's process-group timeout: rank 0 gives up on the silent rank 1 by itself."""
    faulty_rank("hang")
    command = [
        arg if not arg.startswith("--timeout-s=") else "--timeout-s=5"
        for arg in launch_marked(tmp_path)
    ]
    with pytest.raises(RuntimeError, match=r"torchrun exited 1: rank 0 exitcode 1"):
        launch(command, tmp_path / "r.json", timeout_s=90)


@pytest.mark.process
def test_a_stopped_rank_is_named_and_the_case_ends_at_its_heartbeat_stall(
    tmp_path, monkeypatch, faulty_rank
):
    """SIGSTOP on rank 1 mid-training (a frozen rank): rank 0 would wait in its collective until the
    collective timeout and be the one blamed. Rank 1's heartbeat goes stale instead: the launch is
    killed naming rank 1, long before the collective timeout (60 s at smoke), and the failed row
    says so."""
    faulty_rank("stop")
    # the smoke profile's 30 s, shortened for the test
    monkeypatch.setitem(torchrun_launch.HEARTBEAT_STALL_S, "smoke", 4)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    source = DataSource("synthetic", tmp_path)
    writer = ResultsWriter(tmp_path, "run")
    bctx = BuildContext(CPU, "smoke", SyncedClock(CPU), 2, data_source=lambda: source)
    start = time.monotonic()
    with pytest.raises(
        RuntimeError,
        match=r"^rank 1 stopped responding \(no heartbeat for \d+ s, (at step 1|before "
        r"its first step)\): the launch was killed",
    ):
        run_with(
            DistributedCase("ddp", 2, "gloo", 16),
            ddp,
            FakeBenchmark(),
            RunContext(bctx, {"schema_version": SCHEMA_VERSION, "run_id": "r"}, writer),
        )
    # start-up, a step, 4 s of silence: not the 60 s collective timeout
    assert time.monotonic() - start < 50
    writer.close()
    (failed,) = read_rows(tmp_path / "run.csv")
    assert failed["status"] == "failed" and "rank 1 stopped responding" in failed["reason"]
    assert not list(tmp_path.glob("gpubench-ddp-*"))
    deadline = time.monotonic() + 5
    while processes_of(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not processes_of(tmp_path), "a stopped rank survived"


@pytest.mark.process
def test_a_stopped_rank_is_named_when_its_peer_times_out_first(tmp_path, monkeypatch, faulty_rank):
    """The collective timeout shortened below the heartbeat's stall limit: rank 0 fails first
    (torchrun: 'rank 0 exitcode 1'), and the reason still names rank 1, whose heartbeat stopped
    first."""
    faulty_rank("stop")
    command = [
        arg if not arg.startswith("--timeout-s=") else "--timeout-s=8"
        for arg in launch_marked(tmp_path)
    ]
    start = time.monotonic()
    with pytest.raises(
        RuntimeError,
        match=r"^torchrun exited 1: rank 1 stopped responding \(no heartbeat for \d+ s, "
        r".*\); rank 0 exitcode 1",
    ):
        launch(command, tmp_path / "r.json", timeout_s=120, stall_s=600)
    # the 8 s collective timeout, then torchrun's teardown of a stopped rank
    assert time.monotonic() - start < 90
    deadline = time.monotonic() + 5
    while processes_of(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not processes_of(tmp_path), "a stopped rank survived"


def beat(folder: Path, rank: int, step: int, time_s: float) -> None:
    folder.mkdir(exist_ok=True)
    (folder / f"heartbeat-{rank}.json").write_text(
        json.dumps({"rank": rank, "step": step, "time_s": time_s})
    )


@pytest.mark.process
@pytest.mark.parametrize(
    ("body", "code"), [("return 3", 3), ("raise RuntimeError('collective timed out')", 1)]
)
def test_a_rank_leaves_with_its_code_or_1_after_an_exception_and_prints_it(body, code):
    """A rank that raised exits 1 with its traceback, like Python, but without the finalization
    gloo's threads can abort (an atexit handler stands for it)."""
    script = (
        f"import atexit\nfrom gpubench.harness.workloads.common.torchrun_launch import exit_rank\n"
        f"atexit.register(print, 'finalized')\ndef main():\n    {body}\nexit_rank(main)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == code and "finalized" not in done.stdout
    assert ("RuntimeError: collective timed out" in done.stderr) == (code == 1)


def test_the_silent_rank_is_the_one_whose_heartbeat_is_oldest(tmp_path):
    beats = tmp_path / "r-heartbeats"
    # no heartbeat yet: nothing to judge
    assert silent_rank(beats, 30, now_s=1000.0) == ""
    beat(beats, 0, 7, 999.0)
    beat(beats, 1, 3, 960.0)
    assert (
        silent_rank(beats, 30, now_s=1000.0)
        == "rank 1 stopped responding (no heartbeat for 40 s, at step 3)"
    )
    # still inside the stall limit
    assert silent_rank(beats, 60, now_s=1000.0) == ""
    beat(beats, 1, -1, 960.0)
    assert silent_rank(beats, 30, now_s=1000.0).endswith("before its first step)")
    # a rank caught mid-write is skipped, not a crash
    (beats / "heartbeat-2.json").write_text("{torn")
    assert "rank 1" in silent_rank(beats, 30, now_s=1000.0)


def test_the_root_cause_block_is_quoted():
    output = "\n".join(
        [
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
            "============================================================",
            "gpubench.harness.workloads.ddp_worker FAILED",
            "------------------------------------------------------------",
            "Failures:",
            "  <NO_OTHER_FAILURES>",
            "------------------------------------------------------------",
            "Root Cause (first observed failure):",
            "[0]:",
            "  time      : 2026-11-30_07:50:00",
            "  host      : h",
            "  rank       : 1 (local_rank: 1)",
            "  exitcode   : -9 (pid: 1234)",
            "  error_file: <N/A>",
            "  traceback : Signal 9 (SIGKILL) received by PID 1234",
        ]
    )
    assert root_cause(output).startswith("rank 1 exitcode -9 (SIGKILL")
    assert root_cause(output.replace("-9 (pid", "2 (pid")) == "rank 1 exitcode 2"
    assert root_cause("no block here") == ""
    assert rank_error(output) == "no error line in the ranks' output"


# ---- the case's work folder and its launch timeout --------------------------------------------


def test_stale_workdirs_are_swept_fresh_ones_kept(tmp_path):
    old, fresh, other = (
        tmp_path / "gpubench-ddp-old",
        tmp_path / "gpubench-ddp-fresh",
        tmp_path / "someone-else",
    )
    for folder in (old, fresh, other):
        folder.mkdir()
        (folder / "rank0.json").write_text("{}")
    long_ago = time.time() - STALE_WORKDIR_S - 60
    for folder in (old, other):
        os.utime(folder, (long_ago, long_ago))
    sweep_stale_workdirs(folder=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpubench-ddp-fresh", "someone-else"]


@pytest.mark.skipif(os.getuid() != 0, reason="making a folder another user owns needs root")
def test_another_users_stale_workdir_is_never_swept_even_by_root(tmp_path):
    theirs, elsewhere = tmp_path / "gpubench-ddp-theirs", tmp_path / "elsewhere"
    for folder in (theirs, elsewhere):
        folder.mkdir()
        (folder / "rank0.json").write_text("{}")
    os.chown(theirs, 12345, 12345)
    # a link of the name is no workdir: its target stays
    (tmp_path / "gpubench-ddp-link").symlink_to(elsewhere)
    long_ago = time.time() - STALE_WORKDIR_S - 60
    for path in (theirs, elsewhere, tmp_path / "gpubench-ddp-link"):
        os.utime(path, (long_ago, long_ago), follow_symlinks=False)
    sweep_stale_workdirs(folder=tmp_path)
    assert (theirs / "rank0.json").exists() and (elsewhere / "rank0.json").exists()


def test_a_build_that_fails_before_its_timed_leaves_no_workdir(tmp_path, monkeypatch):
    class Missing:
        root = tmp_path

        @property
        def dataset(self) -> str:
            raise UsageError("MNIST not found")

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(UsageError):
        ddp.set_up(
            DistributedCase("ddp", 2, "gloo", 16),
            BuildContext(CPU, "smoke", SyncedClock(CPU), 2, data_source=lambda: Missing()),
        )
    assert not list(tmp_path.glob("gpubench-ddp-*"))


def test_the_launch_timeout_scales_with_the_profile(tmp_path, monkeypatch):
    """The same case built for each profile: the launch's timeout and the ranks' collective
    timeout (half of it) grow with the profile's steps."""
    assert torchrun_launch.LAUNCH_TIMEOUT_S == {"smoke": 120, "quick": 600, "full": 3600}
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    launched = {}
    source = DataSource("synthetic", tmp_path)
    for profile in ("smoke", "quick", "full"):
        monkeypatch.setattr(
            torchrun_launch,
            "launch",
            lambda command, result_json, timeout_s, stall_s, profile=profile: launched.setdefault(
                profile, (command, timeout_s, stall_s)
            ),
        )
        timed = ddp.set_up(
            DistributedCase("ddp", 1, "gloo", 16),
            BuildContext(CPU, profile, SyncedClock(CPU), 1, data_source=lambda: source),
        )
        try:
            timed.fn()
        finally:
            timed.cleanup()
    timeouts = {profile: timeout_s for profile, (_, timeout_s, _) in launched.items()}
    collective = {
        profile: [arg for arg in command if arg.startswith("--timeout-s=")]
        for profile, (command, _, _) in launched.items()
    }
    stalls = {profile: stall_s for profile, (_, _, stall_s) in launched.items()}
    # each profile's own, not one for all
    assert timeouts == {"smoke": 120, "quick": 600, "full": 3600}
    # a quick case with a silent rank ends within 5 minutes: the heartbeat's 60 s, else the
    # collectives' 120 s
    assert collective == {
        "smoke": ["--timeout-s=60"],
        "quick": ["--timeout-s=120"],
        "full": ["--timeout-s=1800"],
    }
    assert stalls == {"smoke": 30, "quick": 60, "full": 120}
    assert timeouts["smoke"] < timeouts["quick"] < timeouts["full"]
