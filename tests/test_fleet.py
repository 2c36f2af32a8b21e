"""gpubench fleet: targets, job watching, the local default end to end (and two fleets into one
store at once), and a real one-node Slurm cluster (tests/slurm_cluster.py; marked `slurm`, skipped
with the reason where the daemons cannot start)."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from gpubench.harness.commands.cli import build_parser, main as cli_main
from gpubench.harness.commands.fleet import (
    DONE,
    FAILED,
    RUNNING,
    FleetJob,
    reason_from_log,
    settle,
    update,
)
from gpubench.harness.commands.fleet import Target, parse_minutes, parse_targets
from gpubench.harness.core.exits import UsageError
from gpubench.harness.commands.common import read_options
from gpubench.harness.commands.fleet_command import drive, run_argv, submit
from gpubench.harness.core.options import RunOptions
from gpubench.harness.records.job_files import private_folder
from gpubench.harness.records.results_reader import read_rows
from store_runs import runs_in

from runs import GPUBENCH

# one case, seconds
TINY = ["--profile", "smoke", "--device", "cpu", "-k", "matmul and fp32"]


def test_targets_parse_into_slurm_parameters():
    a, b = parse_targets(
        [
            "partition=gpu,gres=gpu:1,time=30",
            "nodelist=node[1-2],constraint=h100,time=2:00:00,cpus=8,name=big",
        ]
    )
    assert a.name == "gpu" and a.slurm_parameters() == {
        "job_name": "gpubench-gpu",
        "time": 30,
        "partition": "gpu",
        "gres": "gpu:1",
    }
    assert (
        b.name == "big"
        and b.slurm_parameters()["time"] == 120
        and b.slurm_parameters()["nodelist"] == "node[1-2]"
        and b.cpus == 8
    )
    assert [t.name for t in parse_targets(None)] == ["local"]
    # any other sbatch option submitit takes goes through under its name; the fleet's job name and
    # time win
    [c] = parse_targets(["partition=gpu,mem=32G,account=lab,qos=high,time=5"])
    assert c.slurm_parameters() == {
        "partition": "gpu",
        "mem": "32G",
        "account": "lab",
        "qos": "high",
        "job_name": "gpubench-gpu",
        "time": 5,
    }


@pytest.mark.parametrize(
    "text, message",
    [
        ("partiton=gpu", "is not one of .* as submitit names it \\(account, "),
        ("setup=x", "is not one of"),
        ("partition=a", "two targets"),
        ("time=0:30", "under a minute"),
        ("time=soon", "give minutes"),
        ("cpus=many", "whole number"),
        ("", "is empty"),
        (" , ,", "is empty"),
        ("name=a,name=b", "name= is given twice"),
        ("time=99999999999999999999", "over a year"),
    ],
)
def test_bad_targets_are_one_line_naming_the_fix(text, message):
    with pytest.raises(UsageError, match=message):
        parse_targets(["partition=a", text] if message == "two targets" else [text])


def test_minutes():
    assert (
        parse_minutes("30") == 30
        and parse_minutes("90:00") == 90
        and parse_minutes("1:00:30") == 61
    )


def test_each_job_runs_gpubench_run_into_the_store_with_the_fleets_options():
    args, extra = build_parser().parse_known_args(
        [
            "fleet",
            "--store",
            "S",
            "--profile",
            "smoke",
            "--builds",
            "2",
            "--profile-ops",
            "-k",
            "matmul",
        ]
    )
    args.run = read_options(args)
    argv = run_argv(args, Path("/abs/S"), "F-gpu", Target("gpu", device="cuda:1"), extra)
    assert argv[1:4] == ["-m", "gpubench.harness.commands.cli", "run"] and argv[5:] == [
        "--no-report",
        "-k",
        "matmul",
    ]
    flag, _, given = argv[4].partition("=")
    assert flag == "--run-options" and RunOptions.from_json(given) == replace(
        args.run, store="/abs/S", run_id="F-gpu", device="cuda:1"
    )
    assert (args.run.profile, args.run.builds, args.run.profile_ops) == ("smoke", 2, True)


def test_failure_reasons():
    assert (
        reason_from_log(
            "slurmstepd: error: *** JOB 7 ON n1 CANCELLED AT 2026-01-01T00:00:00 DUE TO TIME "
            "LIMIT ***"
        )
        == "timed out (the target's time limit)"
    )
    assert reason_from_log(
        "slurmstepd: error: *** JOB 7 ON n1 CANCELLED AT 2026-01-01T00:00:00 ***"
    ).startswith("cancelled")
    assert reason_from_log(
        "CalledProcessError: Command '[...]' returned non-zero exit status 5."
    ) == ("gpubench run exited 5 (no case matched -k/-m)")
    # a usage error is one line of gpubench's and exit 4: the reason is that line
    assert reason_from_log(
        "gpubench: error: unrecognized argument --buget 1m — did you mean --budget?\n"
        "CalledProcessError: Command '[...]' returned non-zero exit status 4."
    ) == ("gpubench run exited 4 (unrecognized argument --buget 1m — did you mean --budget?)")


class FakeJob:
    """A submitit job as the watch sees it: state, logs, cancel; `tmp` is the store its run records
    its exit in."""

    def __init__(
        self, job_id: str, tmp: Path, state: str = "RUNNING", out: str = "ran", err: str = ""
    ) -> None:
        self.job_id, self.state, self.cancelled, self.out, self.err, self.store = (
            job_id,
            state,
            False,
            out,
            err,
            tmp,
        )

    def finish(self, run_id: str, code: int = 0) -> None:
        """The job's run ended with `code`, recorded in the store as gpubench run records it."""
        from gpubench.harness.records.store import write_exit

        self.state = "FINISHED"
        (self.store / "m").mkdir(exist_ok=True)
        assert write_exit(self.store / "m", run_id, code) is None

    def stderr(self) -> str:
        return (
            "line\n*** JOB 1 ON n CANCELLED AT 2026 ***"
            if self.state == "INTERRUPTED"
            else self.err
        )

    def stdout(self) -> str:
        return self.out

    def cancel(self, check: bool = True) -> None:
        self.cancelled = True


def test_a_local_job_ending_without_a_result_is_a_failure_naming_why(tmp_path):
    ok, crashed, failed = (FleetJob(Target(n), n) for n in ("ok", "crashed", "failed"))
    ok.job, crashed.job, failed.job = (
        FakeJob("1", tmp_path),
        FakeJob("2", tmp_path, state="INTERRUPTED"),
        FakeJob("3", tmp_path),
    )
    ok.job.finish("ok")
    failed.job.finish("failed", 1)
    update([ok, crashed, failed], "local", tmp_path)
    assert (ok.state, crashed.state, failed.state) == (DONE, FAILED, FAILED)
    assert crashed.reason.startswith("cancelled") and "CANCELLED AT" in crashed.log_tail
    assert failed.reason == "gpubench run exited 1 (a case failed)"


def test_a_slurm_job_gone_from_the_queue_waits_for_its_result_then_fails(tmp_path):
    job = FleetJob(Target("a"), "r")
    job.job = FakeJob("9", tmp_path)
    settle(job, None, tmp_path, now=100.0)
    # NFS: the exit record may come a little later
    assert job.state != FAILED
    settle(job, None, tmp_path, now=200.0)
    assert job.state == FAILED and job.reason.startswith("ended without a result")
    timed_out = FleetJob(Target("b"), "r", job=FakeJob("10", tmp_path))
    settle(timed_out, "TIMEOUT", tmp_path, now=0.0)
    assert timed_out.state == FAILED and timed_out.reason.startswith("timed out")
    killed = FleetJob(Target("c"), "c", job=FakeJob("11", tmp_path))
    # scancel's SIGTERM reached the run, which recorded it
    killed.job.finish("c", 143)
    settle(killed, "CANCELLED", tmp_path, now=0.0)
    assert killed.state == FAILED and killed.reason.startswith("cancelled")


def test_local_targets_run_one_after_another(tmp_path):
    """Two runs at once on one machine would measure each other: the second is submitted only
    once the first finished."""
    jobs = [FleetJob(Target(n), n) for n in ("one", "two")]
    running_at_submit: list[int] = []

    def submit(fleet_job: FleetJob) -> None:
        running_at_submit.append(sum(j.job is not None and not j.finished for j in jobs))
        fleet_job.job = FakeJob(fleet_job.target.name, tmp_path)
        fleet_job.state = RUNNING
        # done by the next poll
        fleet_job.job.finish(fleet_job.run_id)
        (tmp_path / "m").mkdir(exist_ok=True)
        (tmp_path / "m" / f"{fleet_job.run_id}.csv").write_text("x\n")

    drive(jobs, "local", tmp_path, submit, poll_s=0.0)
    assert running_at_submit == [0, 0] and [j.state for j in jobs] == [DONE, DONE]
    assert jobs[1].csv == tmp_path / "m" / "two.csv"


def test_the_fleet_adopts_the_csv_its_job_wrote_not_one_planted_under_its_run_id(tmp_path, capsys):
    """A folder that sorts first holds `<run id>.csv` anyone can rewrite: it was the job's result,
    merged into the report. Now the job's own CSV is, the planted one is named; a job that left none
    of its own failed."""
    jobs = [FleetJob(Target(n), f"F-{n}") for n in ("mine", "none")]

    def submit(fleet_job: FleetJob) -> None:
        fleet_job.job, fleet_job.state = FakeJob(fleet_job.target.name, tmp_path), RUNNING
        planted = tmp_path / "0-theirs" / f"{fleet_job.run_id}.csv"
        planted.parent.mkdir(exist_ok=True)
        planted.write_text("x\n")
        planted.chmod(0o666)
        fleet_job.job.finish(fleet_job.run_id)
        if fleet_job.target.name == "mine":
            (tmp_path / "m" / f"{fleet_job.run_id}.csv").write_text("x\n")

    drive(jobs, "local", tmp_path, submit, poll_s=0.0)
    out = capsys.readouterr().out
    assert jobs[0].state == DONE and jobs[0].csv == tmp_path / "m" / "F-mine.csv"
    assert jobs[1].state == FAILED and jobs[1].csv is None and "F-none.csv" in jobs[1].reason
    assert f"{tmp_path / '0-theirs' / 'F-mine.csv'}: writable by others" in out


def test_a_target_refused_at_submission_is_failed_once_not_resubmitted(tmp_path, monkeypatch):
    """sbatch refused one target (an unknown partition) while another runs for a few polls."""
    import gpubench.harness.commands.fleet as fleet_module

    jobs = [FleetJob(Target("nosuch"), "r"), FleetJob(Target("ok"), "ok")]
    calls: list[str] = []
    answers = iter([{"1": "RUNNING"}, {"1": "RUNNING"}, {"1": "COMPLETED"}])

    def squeue(ids: list[str]) -> dict[str, str]:
        answer = next(answers)
        if answer["1"] == "COMPLETED":
            jobs[1].job.finish("ok")
        return answer

    def submit(fleet_job: FleetJob) -> None:
        calls.append(fleet_job.target.name)
        if fleet_job.target.name == "nosuch":
            fleet_job.state, fleet_job.reason = FAILED, "not submitted: invalid partition"
            return
        fleet_job.job, fleet_job.state = FakeJob("1", tmp_path), "queued"
        (tmp_path / "m").mkdir(exist_ok=True)
        (tmp_path / "m" / "ok.csv").write_text("x\n")

    monkeypatch.setattr(fleet_module, "squeue_states", squeue)
    drive(jobs, "slurm", tmp_path, submit, poll_s=0.0)
    assert calls == ["nosuch", "ok"] and [j.state for j in jobs] == [FAILED, DONE]


def test_cancel_waits_until_squeue_no_longer_lists_the_jobs(tmp_path, monkeypatch):
    """A cancelled job is COMPLETING while its processes stop: squeue still lists it, so the
    fleet waits (the Ctrl-C promise is an empty squeue)."""
    import gpubench.harness.commands.fleet as fleet_module

    answers = iter([{"5": "COMPLETING"}, {"5": "COMPLETING"}, {"5": "CANCELLED"}])
    seen: list[int] = []
    monkeypatch.setattr(fleet_module, "squeue_states", lambda ids: seen.append(1) or next(answers))
    job = FleetJob(Target("a"), "r", job=FakeJob("5", tmp_path), state=RUNNING)
    monkeypatch.setattr(fleet_module.time, "sleep", lambda s: None)
    _, still_queued = fleet_module.cancel_all([job], "slurm")
    assert job.job.cancelled and len(seen) == 3 and still_queued == []


def fleet(
    store: Path, *args: str, env: dict[str, str] | None = None, **popen
) -> subprocess.Popen[str]:
    """A fleet into `store`, its job files beside it (not in the home folder of whoever runs the
    tests)."""
    return subprocess.Popen(
        [
            *GPUBENCH,
            "fleet",
            "--store",
            str(store),
            "--jobs-dir",
            str(store.parent / "jobs"),
            "--poll-seconds",
            "0.5",
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        **popen,
    )


def check_fleet_store(store: Path, out: str, targets: tuple[str, ...]) -> set[str]:
    """Each target's run whole in the store, and the fleet's report covering all of them; the run
    ids."""
    fleet_id = out.split("gpubench fleet: ", 1)[1].split(":", 1)[0]
    run_ids = {f"{fleet_id}-{t}" for t in targets}
    found = {
        csv.stem: csv
        for runs in runs_in(store).values()
        for csv in runs
        if csv.stem.startswith(fleet_id)
    }
    assert set(found) == run_ids, out
    for run_id, csv in found.items():
        rows = read_rows(csv)
        assert (
            rows
            and {r["run_id"] for r in rows} == {run_id}
            and all(r["status"] == "ok" for r in rows)
        )
        assert csv.with_suffix(".env.json").exists()
    merged = read_rows(store / "reports" / fleet_id / "merged.csv")
    assert {r["run_id"] for r in merged} == run_ids and (
        store / "reports" / fleet_id / "report.md"
    ).exists()
    return run_ids


@pytest.mark.process
def test_two_local_fleets_into_one_team_store_at_once_lose_nothing_and_leave_no_code_there(
    tmp_path,
):
    """Two fleets of two targets each at once, into a team's store (setgid, sticky, group-writable)
    under the loosest umask: every run whole, each fleet's report and one report of the whole store;
    nothing submitit pickles is in the store (the fleet loads none), nothing there is
    world-writable or executable; the pickles are in the user's own jobs folder."""
    store = tmp_path / "store"
    store.mkdir()
    store.chmod(0o3775)
    procs = [
        fleet(
            store,
            "--target",
            "name=x",
            "--target",
            "name=y",
            *TINY,
            cwd=tmp_path,
            preexec_fn=lambda: os.umask(0),
        )
        for _ in range(2)
    ]
    outs = [proc.communicate(timeout=900)[0] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outs
    run_ids = check_fleet_store(store, outs[0], ("x", "y")) | check_fleet_store(
        store, outs[1], ("x", "y")
    )
    assert len(run_ids) == 4
    assert all("[x] job" in out and "done ->" in out and "report of 2 runs" in out for out in outs)
    # in this process: the fleets were the processes
    assert cli_main(["report", str(store), "--out", str(tmp_path / "all")]) == 0
    assert {r["run_id"] for r in read_rows(tmp_path / "all" / "merged.csv")} == run_ids
    # no sidecar left half-renamed
    assert not list(store.rglob("*.partial*"))
    written = list(store.rglob("*"))
    assert not [p for p in written if p.suffix == ".pkl"] and list(
        (tmp_path / "jobs").rglob("*_result.pkl")
    )
    assert not [
        p
        for p in written
        if p.stat().st_mode & stat.S_IWOTH or (p.is_file() and p.stat().st_mode & 0o111)
    ]
    assert all(stat.S_IMODE(p.stat().st_mode) & 0o077 == 0 for p in (tmp_path / "jobs").iterdir())


@pytest.mark.process
def test_ctrl_c_stops_the_local_job_and_every_process_under_it(tmp_path):
    """SIGINT to the fleet alone (not the terminal's whole group): the local job's whole tree
    stops."""
    import psutil

    proc = fleet(
        tmp_path / "store",
        "--target",
        "name=long",
        "--profile",
        "smoke",
        "--device",
        "cpu",
        "--builds",
        "100",
        "-k",
        "matmul and fp32",
        cwd=tmp_path,
    )
    lines: list[str] = []
    wait_for(proc, ": running", lines)
    # gpubench run and its first build process have started
    time.sleep(3)
    under = psutil.Process(proc.pid).children(recursive=True)
    assert any("gpubench.harness.commands.cli" in " ".join(p.cmdline()) for p in under)
    os.kill(proc.pid, signal.SIGINT)
    rest, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "[long] job" in rest and "cancelled (interrupted)" in rest, (
        "".join(lines) + rest
    )
    _, alive = psutil.wait_procs(under, timeout=10)
    assert not alive, [p.cmdline() for p in alive]


def command_of(process) -> list[str]:
    import psutil

    try:
        return process.cmdline()
    # gone meanwhile
    except psutil.Error:
        return []


@pytest.mark.process
def test_a_local_fleet_killed_with_9_leaves_no_run_measuring(tmp_path):
    """kill -9 of the fleet: submitit's controller (started without a parent-death signal) ran its
    job on, measuring with no one to read it. A real fleet: the watch spans three processes."""
    import psutil

    proc = fleet(
        tmp_path / "store",
        "--target",
        "name=long",
        "--profile",
        "smoke",
        "--device",
        "cpu",
        "--builds",
        "100",
        "-k",
        "matmul and fp32",
        cwd=tmp_path,
    )
    wait_for(proc, ": running", [])
    deadline = time.monotonic() + 120
    runs: list[psutil.Process] = []
    while not runs and time.monotonic() < deadline:
        runs = [
            p
            for p in psutil.Process(proc.pid).children(recursive=True)
            if command_of(p)[1:4] == ["-m", "gpubench.harness.commands.cli", "run"]
        ]
        time.sleep(0.2)
    assert runs, "gpubench run never started"
    proc.kill()
    proc.wait()
    _, alive = psutil.wait_procs(runs, timeout=60)
    assert not alive, "gpubench run measures on after its fleet was killed"


@pytest.mark.process
def test_a_local_job_runs_in_this_machines_environment(tmp_path, monkeypatch):
    """submitit's local controller sets CUDA_VISIBLE_DEVICES="" for its task (no gpus_per_node):
    every local fleet on a GPU node measured the CPU."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    job = FleetJob(Target("env"), "r")
    show = "import os; print(repr(os.environ.get('CUDA_VISIBLE_DEVICES')))"
    submit(job, "local", private_folder(tmp_path / "jobs"), [sys.executable, "-c", show])
    # result() waits for the job
    assert job.job.result().strip() == "'3,1'"


@pytest.mark.process
def test_ctrl_c_to_the_local_controller_prints_nothing_among_the_fleets_lines(tmp_path, capfd):
    """A terminal's Ctrl-C reaches submitit's local controller too (the same process group): its
    KeyboardInterrupt traceback went to the fleet's stderr."""
    import psutil

    job = FleetJob(Target("quiet"), "r")
    submit(
        job,
        "local",
        private_folder(tmp_path / "jobs"),
        [sys.executable, "-c", "import time; time.sleep(60)"],
    )
    controller = psutil.Process(int(job.job.job_id))
    deadline = time.monotonic() + 60
    # its wait loop runs once its task has started
    while not controller.children() and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    os.kill(controller.pid, signal.SIGINT)
    controller.wait(timeout=60)
    err = capfd.readouterr().err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    # said, where it belongs
    assert "KeyboardInterrupt" in (tmp_path / "jobs" / "controller.log").read_text()


# A local job's tree as fleet.stop_local_tree meets it: submitit's controller -> gpubench run -> a
# build. Each logs the SIGINTs it gets; the run passes its own on to the build, as
# gpubench.harness.processes.launch does.
BUILD = """import os, signal, sys, time
got = []
signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
open(sys.argv[1] + '/build.ready', 'w').close()
deadline = time.monotonic() + 30
while not got and time.monotonic() < deadline:
    time.sleep(0.05)
time.sleep(0.5)  # a second SIGINT meanwhile would be read as a second Ctrl-C
open(sys.argv[1] + '/build.log', 'w').write(str(len(got)))
"""
RUN = """import signal, subprocess, sys
build = subprocess.Popen([sys.executable, sys.argv[1] + '/build.py', sys.argv[1]])
got = []
def passed_on(signum, frame):
    got.append(signum)
    build.send_signal(signum)
signal.signal(signal.SIGINT, passed_on)
build.wait()
open(sys.argv[1] + '/run.log', 'w').write(str(len(got)))
"""
CONTROLLER = """import signal, subprocess, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
cli = ['-m', 'gpubench.harness.commands.cli', 'run']
subprocess.run([sys.executable, sys.argv[1] + '/run.py', sys.argv[1], *cli])
"""


@pytest.mark.process
def test_stopping_a_local_job_signals_its_run_once_and_the_build_only_through_it(tmp_path):
    """gpubench run passes SIGINT on to its build; signalled directly as well, the build got it
    twice, and the run's launcher read a second SIGINT as a second Ctrl-C: killed mid-unwind."""
    from gpubench.harness.commands.fleet import stop_local_tree

    for name, text in (("build.py", BUILD), ("run.py", RUN), ("controller.py", CONTROLLER)):
        (tmp_path / name).write_text(text)
    controller = subprocess.Popen([sys.executable, str(tmp_path / "controller.py"), str(tmp_path)])
    deadline = time.monotonic() + 60
    while not (tmp_path / "build.ready").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    # the run's handler is in
    time.sleep(0.3)
    stop_local_tree(str(controller.pid), grace_s=30)
    controller.wait(timeout=30)
    assert ((tmp_path / "run.log").read_text(), (tmp_path / "build.log").read_text()) == ("1", "1")


def test_the_reason_is_the_end_written_last_in_the_log():
    log = (
        "UserWarning: could not write the compile cache: No space left on device\nslurmstepd: *** "
        "JOB 7 ON n1 CANCELLED AT 2026-12-01T04:00:00 ***\n"
    )
    assert reason_from_log(log).startswith("cancelled")


def test_cluster_without_binaries_is_a_skip_reason(tmp_path, monkeypatch):
    from slurm_cluster import ClusterUnavailable, SlurmCluster

    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(
        ClusterUnavailable, match="binaries missing .*apt-get install slurm-wlm munge"
    ):
        SlurmCluster(tmp_path).start()


@pytest.mark.process
def test_fleet_without_a_store_is_one_line(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "gpubench.harness.commands.cli", "fleet", "--target", "partition=a"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "needs --store" in done.stderr


# ---------------------------------------------------------------- a real Slurm cluster on this
# machine


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    from slurm_cluster import ClusterUnavailable, SlurmCluster

    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
    except ClusterUnavailable as error:
        cluster.stop()
        pytest.skip(f"no local Slurm cluster: {error}")
    try:
        yield cluster
    finally:
        cluster.stop()


def wait_for(
    proc: subprocess.Popen[str], text: str, lines: list[str], timeout_s: float = 300
) -> None:
    """Read the fleet's output until a line holds `text`."""
    deadline = time.monotonic() + timeout_s
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if text in line:
            return
    raise AssertionError(f"never saw {text!r}:\n{''.join(lines)}")


@pytest.mark.slurm
def test_slurm_fleet_on_two_partitions(slurm, tmp_path):
    started = time.monotonic()
    proc = fleet(
        tmp_path / "store",
        "--cluster",
        "slurm",
        "--target",
        "partition=a,time=10",
        "--target",
        "partition=b,time=10",
        *TINY,
        env=slurm.env,
        cwd=tmp_path,
    )
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    check_fleet_store(tmp_path / "store", out, ("a", "b"))
    assert out.count(": queued") == 2 and out.count(": done ->") == 2
    print(f"slurm fleet of two partitions: {time.monotonic() - started:.1f} s wall")


# a build per process: minutes
LONG = ["--profile", "smoke", "--device", "cpu", "--builds", "100", "-k", "matmul and fp32"]


@pytest.mark.slurm
def test_slurm_job_cancelled_with_scancel_is_a_line_naming_the_target(slurm, tmp_path):
    proc = fleet(
        tmp_path / "store",
        "--cluster",
        "slurm",
        "--target",
        "partition=b,time=10,name=victim",
        "--target",
        "partition=nosuch",
        *LONG,
        env=slurm.env,
        cwd=tmp_path,
    )
    lines: list[str] = []
    wait_for(proc, ": running", lines)
    job_id = lines[-1].split(" job ", 1)[1].split(":", 1)[0]
    subprocess.run(["scancel", job_id], env=slurm.env, check=True, timeout=60)
    rest, _ = proc.communicate(timeout=300)
    out = "".join(lines) + rest
    assert proc.returncode == 1, out
    assert f"[victim] job {job_id}: FAILED — cancelled" in out and "victim FAILED (cancelled" in out
    # named once, never resubmitted
    assert out.count("[nosuch]: FAILED — not submitted: sbatch: error: invalid partition") == 1, out


@pytest.mark.slurm
def test_ctrl_c_cancels_every_submitted_job(slurm, tmp_path):
    proc = fleet(
        tmp_path / "store",
        "--cluster",
        "slurm",
        "--target",
        "partition=a,time=10",
        "--target",
        "partition=b,time=10",
        *LONG,
        env=slurm.env,
        cwd=tmp_path,
    )
    lines: list[str] = []
    wait_for(proc, ": running", lines)
    assert len(slurm.queue()) == 2
    os.kill(proc.pid, signal.SIGINT)
    rest, _ = proc.communicate(timeout=120)
    out = "".join(lines) + rest
    assert proc.returncode == 130, out
    assert out.count("cancelled (interrupted)") == 2 and slurm.queue() == [], out


# ---------------------------------------------- the fault campaign's fixes
# (docs/validation/fault-campaign-fleet.md)

SUBMITIT_TRACE = """Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/submitit/core/submission.py", line 55, in process_job
    result = delayed.result()
             ^^^^^^^^^^^^^^^^
  File "/venv/lib/python3.11/site-packages/submitit/core/utils.py", line 359, in __call__
    raise FailedJobError(stderr) from subprocess_error
""" + (
    "submitit.core.utils.FailedJobError: ERROR: cuda was requested but "
    "torch.cuda.is_available() is False — use --device cpu\n"
)


def test_the_tail_shows_the_runs_error_not_submitits_frames(tmp_path):
    """A failed job's tail is what the run wrote, without the dozen lines of submitit's frames
    around it."""
    from gpubench.harness.commands.fleet import log_tail

    tail = log_tail(FakeJob("1", tmp_path, err=SUBMITIT_TRACE))
    assert "ERROR: cuda was requested" in tail and 'File "' not in tail and "Traceback" not in tail


def test_submitits_timeout_and_a_full_store_are_named_from_the_log(tmp_path):
    """submitit's USR2 ends a job it may not requeue before Slurm does (state FAILED, not TIMEOUT),
    and a full store leaves no result file: each is named from the job's log (`timed out`, `the
    store filled up`), not as `the job's command failed` or `ended without a result`."""
    timed_out = (
        "submitit WARNING (2026-12-01) - Caught signal SIGUSR2 on vm: this job is timed-out.\n"
    )
    assert reason_from_log(
        "FailedJobError: Job got killed for an unknown reason.\n" + timed_out
    ).startswith("timed out")
    full = FleetJob(
        Target("f"),
        "r",
        job=FakeJob(
            "2",
            tmp_path,
            out="Could not dump error:\nbecause of [Errno 28] No space left on device",
        ),
    )
    settle(full, None, tmp_path, now=0.0, grace_s=0.0)
    assert full.state == FAILED and full.reason.startswith("the store filled up"), full.reason


def test_a_pending_job_that_no_wait_starts_says_why(tmp_path, monkeypatch, capsys):
    """A job no wait starts (cpus=99 on a 2-CPU node) is not left as `queued`: squeue's reason is
    shown."""
    import gpubench.harness.commands.fleet as fleet_module
    from gpubench.harness.commands.fleet import QUEUED
    from gpubench.harness.commands.fleet_command import announce

    stuck, waiting = (
        FleetJob(Target("a"), "r", job=FakeJob("1", tmp_path)),
        FleetJob(Target("b"), "r", job=FakeJob("2", tmp_path)),
    )
    monkeypatch.setattr(
        fleet_module,
        "squeue_states",
        lambda ids: {"1": "PENDING|PartitionConfig", "2": "PENDING|Priority"},
    )
    update([stuck, waiting], "slurm", tmp_path)
    assert (stuck.state, stuck.stuck, waiting.state, waiting.stuck) == (
        QUEUED,
        "PartitionConfig",
        QUEUED,
        "",
    )
    announce(stuck, tmp_path)
    assert "squeue says PartitionConfig" in capsys.readouterr().out


def test_slurm_jobs_are_not_requeued_and_get_submitits_signal_20_s_before_their_limit(tmp_path):
    """--no-requeue: a job requeued after its node failed would rerun under a run id that exists;
    and submitit's USR2 comes 20 s before the limit, so even a time=1 job runs most of its
    minute."""
    from submitit.slurm.slurm import _make_sbatch_string

    from gpubench.harness.commands.fleet_command import make_executor

    if shutil.which("srun") is None:
        pytest.skip("submitit's SlurmExecutor needs srun on PATH")
    executor = make_executor(
        "slurm", tmp_path, Target("a", time_min=5, slurm={"partition": "a", "mem": "4G"})
    )
    script = _make_sbatch_string(command="true", folder=tmp_path, **executor.parameters)
    assert "#SBATCH --no-requeue" in script and "#SBATCH --signal=USR2@20" in script, script
    assert "#SBATCH --mem=4G" in script and "#SBATCH --partition=a" in script, script
    assert make_executor("local", tmp_path, Target("l")).parameters["signal_delay_s"] == 20


def test_a_stop_signal_during_submission_waits_for_the_job_then_stops(tmp_path):
    """Ctrl-C while sbatch answers waits for its answer, so the job the controller queued is known
    and cancelled rather than left running."""
    jobs = [FleetJob(Target("t1"), "r")]

    def submit(fleet_job: FleetJob) -> None:
        # arrives while sbatch runs
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)
        fleet_job.job, fleet_job.state = FakeJob("7", tmp_path), "queued"

    with pytest.raises(KeyboardInterrupt):
        drive(jobs, "slurm", tmp_path, submit, poll_s=0.0)
    # known, so cancel_all cancels it
    assert jobs[0].job is not None


def test_a_second_ctrl_c_while_the_jobs_stop_is_ignored(tmp_path, monkeypatch, capsys):
    """A second Ctrl-C during the wait for squeue is ignored: no traceback, and the fleet's closing
    line (what was kept; here `nothing was measured`) still comes."""
    import gpubench.harness.commands.fleet_command as command

    def cancel(jobs, engine):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)
        return [jobs[0].label], []

    monkeypatch.setattr(command, "cancel_all", cancel)
    job = FleetJob(Target("a"), "r", job=FakeJob("5", tmp_path), state=RUNNING)
    assert command.interrupted([job], "slurm", tmp_path) == 130
    assert "interrupted: nothing was measured" in capsys.readouterr().out


def test_ctrl_c_while_the_report_is_built_names_the_runs_and_exits_130(
    tmp_path, monkeypatch, capsys
):
    """Ctrl-C during the final report is one line naming the runs kept and how to build the report,
    no traceback."""
    import gpubench.reports.render.build
    from gpubench.harness.commands.fleet_command import summary_and_report
    from gpubench.harness.processes.lifetime import stops_raised

    def slow_report(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)

    monkeypatch.setattr(gpubench.reports.render.build, "build_report", slow_report)
    csv = tmp_path / "m" / "r.csv"
    job = FleetJob(Target("a"), "r", state=DONE, csv=csv)
    with stops_raised():
        assert summary_and_report([job], tmp_path, tmp_path / "out") == 130
    assert f"gpubench report {csv} --out" in capsys.readouterr().out


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_and_sighup_stop_the_fleet_with_their_own_exit_code(signum, code):
    """SIGTERM and SIGHUP (the terminal closed) stop the fleet as Ctrl-C does, each with its own
    exit code: 143 and 129, not Ctrl-C's 130."""
    from gpubench.harness.processes.lifetime import stops_raised

    with pytest.raises(KeyboardInterrupt) as stopped, stops_raised():
        os.kill(os.getpid(), signum)
        time.sleep(1)
    assert stopped.value.code == code


@pytest.mark.parametrize(
    "errno_value, message",
    [(28, "is full: nothing was submitted"), (30, r"cannot be written \(Read-only file system\)")],
)
def test_a_store_without_room_or_write_access_is_refused_before_any_job(
    tmp_path, monkeypatch, errno_value, message
):
    """A full or unwritable store is one line before any job, not each target failing as `[Errno 28]
    ...`."""
    import tempfile

    from gpubench.harness.commands.fleet_command import StoreFull, prepare_store

    def refuse(**kwargs):
        raise OSError(errno_value, os.strerror(errno_value))

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(UsageError, match=message) as refused:
        prepare_store(tmp_path / "S")
    assert isinstance(refused.value, StoreFull) == (errno_value == 28)


@pytest.mark.process
@pytest.mark.parametrize(
    "case",
    [
        "store-is-a-file",
        "pytest-form-option",
        "no-slurm-clients",
        "budget-without-unit",
        "bad-input",
    ],
)
def test_fleet_refuses_before_any_job_in_one_line(tmp_path, case):
    """A store that is a file, `--gpubench-results-dir` passed through (the rows would go where the
    fleet never looks), --cluster slurm without sbatch: one line, exit 2, no job."""
    (tmp_path / "afile").write_text("")
    argv, env = {
        "store-is-a-file": (["--store", "afile"], None),
        "pytest-form-option": (["--store", "S", "--gpubench-results-dir=elsewhere"], None),
        "no-slurm-clients": (
            ["--store", "S", "--cluster", "slurm"],
            dict(os.environ, PATH=str(tmp_path)),
        ),
        # what each job would refuse in its first line: found before any is submitted
        "budget-without-unit": (["--store", "S", "--budget", "90"], None),
        "bad-input": (["--store", "S", "--model", "m:f", "--input", "0x3"], None),
    }[case]
    jobs = tmp_path / "jobs"
    done = subprocess.run(
        [
            *GPUBENCH,
            "fleet",
            *argv,
            "--jobs-dir",
            str(jobs),
            *TINY,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stdout + done.stderr
    assert {
        "store-is-a-file": "is not a folder",
        "pytest-form-option": "drop it",
        "no-slurm-clients": "needs sbatch",
        "budget-without-unit": "--budget '90': use a duration such as 90s",
        "bad-input": "--input '0x3': give one sample's shape",
    }[case] in done.stderr
    assert not jobs.exists() or not any(jobs.iterdir()), "a job was written before the refusal"


@pytest.mark.slurm
def test_a_node_lost_mid_run_is_named_and_its_rows_kept(slurm, tmp_path):
    """A node set DOWN under a running job: the job is not requeued (a rerun would be refused, its
    run id exists), it is reported as `its node failed`, and its rows are kept."""
    store = tmp_path / "store"
    proc = fleet(
        store,
        "--cluster",
        "slurm",
        "--target",
        "partition=a,time=10,name=victim",
        *LONG,
        env=slurm.env,
        cwd=tmp_path,
    )
    lines: list[str] = []
    wait_for(proc, ": running", lines)
    deadline = time.monotonic() + 120
    # a row written, so there is something to keep
    while not list(store.glob("*/*.csv")) and time.monotonic() < deadline:
        time.sleep(0.5)
    try:
        subprocess.run(
            ["scontrol", "update", f"nodename={slurm.node}", "state=down", "reason=fleet-test"],
            env=slurm.env,
            check=True,
            timeout=60,
        )
        rest, _ = proc.communicate(timeout=300)
    finally:
        subprocess.run(
            ["scontrol", "update", f"nodename={slurm.node}", "state=idle"],
            env=slurm.env,
            check=False,
            timeout=60,
        )
        slurm._wait_idle()
    out = "".join(lines) + rest
    assert proc.returncode == 1, out
    assert (
        "[victim] job" in out
        and ": FAILED — its node failed; " in out
        and "keeps the rows measured" in out
        and out.count(": queued") == 1
    ), out
