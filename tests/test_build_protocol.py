"""A build's plan and answer (gpubench.harness.processes.protocol), and builds forked from the fork
server (gpubench.harness.pytest_plugin.forked and .fork_server): each gets its plan, answers with
its rows and costs, shares no state with the server or an earlier build, and unwinds its case on
Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
from runs import REPO

from gpubench.harness.core.model_spec import ModelSpec
from gpubench.harness.core.options import RunOptions
from gpubench.harness.pytest_plugin.forked import ForkLauncher
from gpubench.harness.processes.launch import Completed, Job, ProcessLauncher, python_module
from gpubench.harness.processes.protocol import BuildAnswer, BuildPlan, ProtocolError, last_answer
from gpubench.harness.pytest_plugin import fork_server


def test_a_plan_and_an_answer_round_trip_as_json():
    run = RunOptions(device="cpu", run_budget_s=90.0, model=ModelSpec("m", "f", (3, 8), 50))
    plan = BuildPlan(
        2,
        ["-k", "matmul", "--benchmark-json", "x.json"],
        ["benches"],
        run,
        3,
        "b2",
        "/s/build-2.json",
        True,
        deadline_s=1.5e9,
    )
    assert BuildPlan.from_json(plan.to_json()) == plan
    answer = BuildAnswer(
        2, 3, 4, {"test_matmul[fp32-n64-b2]": 0.5}, 0, "x.b2.json", False, 0.25, ["a note"]
    )
    assert BuildAnswer.from_json(answer.to_json()) == answer


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"build": "2", "pytest_args": [], "suite_args": []}', "BuildPlan.build: '2' is not int"),
        (
            '{"build": true, "pytest_args": [], "suite_args": []}',
            "BuildPlan.build: True is not int",
        ),
        ('{"build": 0, "pytest_args": [], "suite_args": [], "argv": []}', "unknown field 'argv'"),
        ('{"build": 0, "suite_args": []}', "pytest_args"),
        (
            '{"build": 0, "pytest_args": [], "suite_args": [], "run": {"builds": "2"}}',
            "RunOptions.builds: '2' is not int",
        ),
        (
            '{"build": 0, "pytest_args": [], "suite_args": [], "run": {"speed": 2}}',
            "not a RunOptions",
        ),
        ("[0]", "a BuildPlan is a JSON object"),
    ],
)
def test_a_message_of_another_shape_is_refused_naming_the_field(text, why):
    with pytest.raises(ProtocolError, match=why.replace("[", r"\[")):
        BuildPlan.from_json(text)


def test_the_last_whole_answer_counts():
    collected, final = BuildAnswer(0, 3), BuildAnswer(0, 3, rows_written=2, exit_code=0)
    assert last_answer(f"{collected.to_json()}\n{final.to_json()}\n".encode()) == final
    assert (
        last_answer(f'{collected.to_json()}\n{{"build": 0, "bui'.encode()) == collected
        # died while writing the second
    )
    assert last_answer(b"") is None


PROFILER_IMPORTS = """
import sys
from gpubench.harness.pytest_plugin import fork_server
print(fork_server.preload() or "fork ok")
print("torch._dynamo" in sys.modules)
print(fork_server.preload_compiler() or "fork ok")
before = set(sys.modules)
import torch
from gpubench.harness.devices.device import cpu_peak_bytes
cpu_peak_bytes(lambda: torch.randn(1000))
print(sorted(name for name in set(sys.modules) - before if name.startswith("torch._dynamo")))
"""


@pytest.mark.process
def test_the_compiler_is_imported_before_a_second_build_only():
    """The CPU peak-memory profiler imports torch._dynamo when it first starts (seconds). A server's
    start leaves it out (a run of one build never needs it); before the second build the server
    imports it, so that build's first memory measurement imports none, and the server can still
    fork."""
    done = subprocess.run(
        [sys.executable, "-c", PROFILER_IMPORTS],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-4:] == ["fork ok", "False", "fork ok", "[]"]


# A compiler import that starts a thread (a site hook here): the server can no longer fork after it.
THREAD_AT_COMPILER_IMPORT = """
import sys
import threading


class StartsAThread:
    def find_spec(self, name, path=None, target=None):
        if name == "torch._dynamo":
            sys.meta_path.remove(self)
            threading.Thread(target=threading.Event().wait, daemon=True).start()
        return None


sys.meta_path.insert(0, StartsAThread())
"""


def torch_has_cuda() -> bool:
    import torch

    return torch.cuda._is_compiled()


ASKS_CUDA_THEN_FORKS = """
import torch
from gpubench.harness.pytest_plugin import fork_server
print(fork_server.preload() or "fork ok")
torch.cuda.is_available()
print(fork_server.why_fork_unsafe() or "fork ok")
"""


# a fresh interpreter: this one may have asked CUDA already
@pytest.mark.process
@pytest.mark.skipif(
    not torch_has_cuda(), reason="torch is built without CUDA here: no fork flag to find"
)
def test_a_server_that_asked_the_cuda_runtime_anything_forks_nothing():
    """No GPU needed: a CUDA build of torch flags its future forks at the first question to the
    runtime, GPU or not."""
    done = subprocess.run(
        [sys.executable, "-c", ASKS_CUDA_THEN_FORKS],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == [
        "fork ok",
        "torch asked the CUDA runtime a question in the fork server (torch.cuda.is_available() at "
        "an import): a forked build could not use CUDA",
    ]


def test_a_server_with_cuda_initialised_forks_nothing(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert (
        fork_server.why_fork_unsafe()
        == "CUDA is initialised in the fork server: a forked build could not use it"
    )


# Each build records what it finds before touching anything, then changes it: a later build must
# find the server's state again (a fresh process), not what the earlier build left.
PROBE_BENCH = """
import json, os, sys, time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy
import torch

import gpubench.harness.measurement.measure as shared  # imported by the fork server before it forks
from gpubench.harness.measurement.cases import Case
from gpubench.harness.measurement.measure import Timed

gpubench_workload = sys.modules[__name__]
HERE = Path(__file__).parent


@dataclass(frozen=True)
class TinyCase(Case):
    workload: ClassVar[str] = "matmul"
    size: int


def cases(ctx):
    return [TinyCase(8)]


def set_up(case, ctx):
    if (HERE / "wait-for-ctrl-c").exists():
        (HERE / "waiting").write_text("yes")
        try:
            time.sleep(60)
        finally:
            (HERE / "unwound").write_text("yes")
    return Timed(fn=lambda: None)


# as the server left them: the look before the first case may move them
THREADS_AT_IMPORT = torch.get_num_threads()


def test_tiny(case, gpubench, gpubench_build):
    seen = {"marker": getattr(shared, "probe_marker", None), "threads": THREADS_AT_IMPORT,
            "seed": torch.initial_seed(),
            "numpy": float(numpy.random.random()), "pid": os.getpid(), "ppid": os.getppid(),
            "cuda_usable": not torch.cuda._is_in_bad_fork()}
    # a tensor of this build, left in a module the server imported
    shared.probe_marker = torch.ones(1 << 16)
    torch.set_num_threads(1)
    torch.manual_seed(1234)
    (HERE / f"seen-{gpubench_build}.json").write_text(json.dumps(seen))
    gpubench.run(case)
"""


def probe_plan(folder: Path, build: int, *user: str) -> BuildPlan:
    (folder / "bench_probe.py").write_text(PROBE_BENCH)
    options = [
        str(folder / "bench_probe.py"),
        "-p",
        "gpubench.harness.pytest_plugin.plugin",
        "-p",
        "no:cacheprovider",
        f"--rootdir={folder}",
        "-o",
        "python_files=bench_*.py",
        "--benchmark-quiet",
        "-q",
    ]
    run = RunOptions(
        device="cpu", profile="smoke", results_dir=str(folder / "res"), run_id="probe", builds=2
    )
    return BuildPlan(
        build,
        list(user),
        options,
        run,
        None if build == 0 else 2,
        f"b{build}" if build else "",
        str(folder / f"table-{build}.json"),
    )


def probe_job(folder: Path, build: int, *user: str) -> Job:
    return Job(
        python_module("gpubench.harness.processes.build_main"),
        dict(os.environ, PYTHONPATH=str(REPO)),
        hold_sigint=True,
        plan=probe_plan(folder, build, *user),
    )


# forks builds from a fork server: its start imports torch (seconds)
@pytest.mark.process
def test_forked_builds_get_their_plans_answer_and_share_no_state(tmp_path):
    launcher = ForkLauncher()
    try:
        first = launcher.run(
            probe_job(tmp_path, 0, "--benchmark-json", str(tmp_path / "mine.json"))
        )
        second = launcher.run(
            probe_job(tmp_path, 1, "--benchmark-json", str(tmp_path / "mine.json"))
        )
        server_pid = launcher.server.process.pid if launcher.server is not None else None
    finally:
        launcher.close()
    # forked, not the plain fallback
    assert launcher.plain_why == "" and server_pid is not None
    assert (first.code, second.code) == (0, 0)
    assert first.answer is not None and second.answer is not None
    assert (first.answer.builds, first.answer.rows_written, first.answer.exit_code) == (2, 1, 0)
    assert (
        list(second.answer.case_cost_s) == ["test_tiny[n8-b1]"]
        and second.answer.case_cost_s["test_tiny[n8-b1]"] > 0
    )
    # the user's --benchmark-json, one file per build, named by the build from pytest's parsed
    # options
    assert (first.answer.benchmark_json, second.answer.benchmark_json) == (
        str(tmp_path / "mine.json"),
        str(tmp_path / "mine.b1.json"),
    )
    assert json.loads((tmp_path / "mine.b1.json").read_text())["benchmarks"]
    seen = [json.loads((tmp_path / f"seen-{build}.json").read_text()) for build in (0, 1)]
    assert [s["ppid"] for s in seen] == [server_pid, server_pid] and seen[0]["pid"] != seen[1][
        "pid"
    ]
    # the first build's tensor stayed in the first build
    assert seen[1]["marker"] is None
    assert (
        seen[1]["threads"] == seen[0]["threads"] and seen[1]["seed"] == seen[0]["seed"]
        # torch as the server left it
    )
    # numpy's global generator reseeded, as in a fresh interpreter
    assert seen[0]["numpy"] != seen[1]["numpy"]
    # torch's fork flag, set when the server asked the CUDA runtime anything (an import calling
    # torch.cuda.is_available()): a build forked then dies at its first CUDA call. Only a torch
    # built with CUDA keeps the flag.
    if torch_has_cuda():
        # the first build, and the second after the compiler's import
        assert [s["cuda_usable"] for s in seen] == [True, True]


# a fork server, then a plain build process
@pytest.mark.process
def test_a_server_the_compiler_import_made_unsafe_hands_the_second_build_to_a_plain_process(
    tmp_path,
):
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(THREAD_AT_COMPILER_IMPORT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(hook), str(REPO)]))
    launcher = ForkLauncher()
    try:
        first = launcher.run(replace(probe_job(tmp_path, 0), env=env))
        server_pid = launcher.server.process.pid if launcher.server is not None else None
        second = launcher.run(replace(probe_job(tmp_path, 1), env=env))
    finally:
        launcher.close()
    assert (
        launcher.plain_why
        == "1 other Python thread(s) run in the fork server: a fork would copy their locks"
    )
    assert (
        (first.code, second.code) == (0, 0)
        and second.answer is not None
        and second.answer.rows_written == 1
    )
    seen = [json.loads((tmp_path / f"seen-{build}.json").read_text()) for build in (0, 1)]
    # forked, then started plainly
    assert seen[0]["ppid"] == server_pid and seen[1]["ppid"] == os.getpid()


# a forked build, and a Ctrl-C to this process while its case runs
@pytest.mark.process
def test_ctrl_c_unwinds_a_forked_build(tmp_path):
    (tmp_path / "wait-for-ctrl-c").write_text("yes")
    launcher = ForkLauncher()

    def ctrl_c_once_waiting() -> None:
        while not (tmp_path / "waiting").exists() and not stop.is_set():
            stop.wait(0.05)
        if not stop.is_set():
            # as `kill -INT <gpubench run>`: the launcher passes it on
            os.kill(os.getpid(), signal.SIGINT)

    stop = threading.Event()
    watcher = threading.Thread(target=ctrl_c_once_waiting, daemon=True)
    watcher.start()
    try:
        done = launcher.run(probe_job(tmp_path, 0))
    finally:
        stop.set()
        launcher.close()
    assert launcher.plain_why == ""
    # interrupted, not killed after the grace
    assert (done.code, done.signal, done.stalled) == (2, signal.SIGINT, "")
    assert (tmp_path / "unwound").exists()
    assert done.answer is not None and done.answer.exit_code == 2


# a plain build process gets the same plan and answers the same way
@pytest.mark.process
def test_a_plain_build_gets_its_plan_and_answers(tmp_path):
    done = ProcessLauncher().run(probe_job(tmp_path, 0, "-k", "tiny"))
    assert done.code == 0 and done.answer is not None
    assert (done.answer.rows_written, done.answer.benchmark_json, done.answer.builds) == (
        1,
        str(tmp_path / "table-0.json"),
        2,
    )
    assert done.answer.startup_s is not None and done.answer.startup_s > 0
    assert json.loads((tmp_path / "seen-0.json").read_text())["ppid"] == os.getpid()


def test_a_build_without_a_readable_plan_says_so_in_one_line(capfd):
    from gpubench.harness.processes.build_main import run_from_fds

    read_fd, write_fd = os.pipe()
    os.write(write_fd, b'{"build": "zero"}')
    os.close(write_fd)
    assert run_from_fds(read_fd, 1) == 3
    err = capfd.readouterr().err
    assert (
        err.count("\n") == 1
        and "this build's plan cannot be read (BuildPlan.build: 'zero' is not int)" in err
    )


# a torch-free interpreter: a fraction of a second
@pytest.mark.process
@pytest.mark.parametrize(
    "args", [["-k", "tiny"], ["--plan-fd=3"], ["--plan-fd=3", "--answer-fd=4", "-k", "tiny"]]
)
def test_a_build_process_has_one_entry_and_names_it(args):
    done = subprocess.run(
        python_module("gpubench.harness.processes.build_main", *args),
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        timeout=60,
    )
    assert done.returncode == 4 and done.stdout == ""
    assert done.stderr == (
        "gpubench: error: a build process takes only --plan-fd and --answer-fd: start builds "
        "through gpubench run or gpubench ab\n"
    )


def forked_while_waiting(
    tmp_path: Path, launcher: ForkLauncher, act: Callable[[int], None]
) -> tuple[float, Completed, int]:
    """A forked build whose case waits 60 s; `act(server_pid)` once it waits. How long the launch
    took, its end, the server."""
    (tmp_path / "wait-for-ctrl-c").write_text("yes")
    stop, pids = threading.Event(), []

    def when_waiting() -> None:
        while not (tmp_path / "waiting").exists() and not stop.is_set():
            stop.wait(0.05)
        if not stop.is_set() and launcher.server is not None:
            pids.append(launcher.server.process.pid)
            act(pids[0])

    threading.Thread(target=when_waiting, daemon=True).start()
    started_s = time.monotonic()
    try:
        done = launcher.run(probe_job(tmp_path, 0))
    finally:
        stop.set()
        launcher.close()
    return time.monotonic() - started_s, done, pids[0]


# a forked build whose fork server someone stopped, then a Ctrl-C
@pytest.mark.process
def test_a_ctrl_c_reaches_a_forked_build_whose_server_was_stopped(tmp_path):
    def stop_server_then_ctrl_c(server_pid: int) -> None:
        os.kill(server_pid, signal.SIGSTOP)
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGINT)

    took_s, done, server_pid = forked_while_waiting(
        tmp_path, ForkLauncher(), stop_server_then_ctrl_c
    )
    assert (
        took_s < 30
        and (done.code, done.signal) == (2, signal.SIGINT)
        and (tmp_path / "unwound").exists()
    )
    assert done.stalled == (
        "waited on its fork server, which had been stopped (state T): continued so it could pass "
        "SIGINT on"
    )
    assert not psutil.pid_exists(server_pid)


# a forked build whose fork server stays stopped
@pytest.mark.process
def test_a_fork_server_stopped_past_the_limit_is_killed_with_its_build_and_named(tmp_path):
    took_s, done, server_pid = forked_while_waiting(
        tmp_path, ForkLauncher(stopped_limit_s=1.0), lambda pid: os.kill(pid, signal.SIGSTOP)
    )
    assert took_s < 30 and done.code == -signal.SIGKILL
    assert done.stalled == (
        "made no progress: its fork server was stopped (state T, SIGSTOP) for 1 s: killed, the "
        "build with it"
    )
    assert not psutil.pid_exists(server_pid)


# a forked build whose fork server is killed with -9
@pytest.mark.process
def test_a_build_lost_with_its_killed_fork_server_names_the_server_not_the_build(tmp_path):
    took_s, done, _ = forked_while_waiting(
        tmp_path, ForkLauncher(), lambda pid: os.kill(pid, signal.SIGKILL)
    )
    assert took_s < 30 and done.code == -signal.SIGKILL
    assert (
        done.stalled == "was lost with its fork server, which ended mid-build (killed by SIGKILL)"
    )
