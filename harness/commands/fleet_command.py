"""`gpubench fleet`: one job per target through submitit, every job writing into one results store,
then one report. Without --cluster the targets run here one after another (two runs at once would
measure each other); with --cluster slurm every target is submitted at once and Slurm places
them."""

from __future__ import annotations

import argparse
import errno
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpubench.harness.core.pytest_args import own_options
from gpubench.harness.commands.fleet import (
    DONE,
    ENGINES,
    FAILED,
    QUEUED,
    SIGNAL_DELAY_S,
    WAITING,
    FleetJob,
    Target,
    cancel_all,
    forget_submission,
    parse_targets,
    update,
)
from gpubench.harness.core.exits import ExitCode, StopSignal, UsageError
from gpubench import IMPORT_ROOT
from gpubench.harness.commands.common import RUN_OPTIONS_FLAG, fail, read_options
from gpubench.harness.records.job_files import check_folder, default_jobs_dir, private_folder
from gpubench.harness.processes.lifetime import (
    STOP_WITH_ENV,
    handlers_installed,
    process_token,
    stops_raised,
)
from gpubench.harness.core.options import RESULTS_DIR_DEFAULT, add_to_parser
from gpubench.harness.records.safe_files import RefusedPath, link_line, make_folders, refuse_link
from gpubench.harness.records.store import REPORTS_FOLDER, STORE_FIX, find_run
from gpubench.harness.core.console import CONSOLE

PASSES_PYTEST_ARGS = True
POLL_S = 2.0
SLURM_CLIENTS = ("sbatch", "squeue", "scancel")


def setup_arguments(sub: argparse._SubParsersAction) -> None:
    fleet = sub.add_parser(
        "fleet",
        help="run the suite on many targets (Slurm through submitit, or here), into one "
        "results store, then one report",
        description="One job per --target, each running `gpubench run --store STORE` where it "
        "lands, then one report of every run. Without --cluster the targets run on this "
        "machine, one after another. Arguments gpubench does not know are passed to "
        "each run's pytest (e.g. -k matmul, -m 'not slow').",
    )
    add_to_parser(fleet)
    fleet.add_argument(
        "--target",
        action="append",
        metavar="KEY=VALUE,...",
        help="one job: partition=, gres= (gpu:N), time= (minutes or H:MM:SS), constraint=, "
        "nodelist=, cpus=, device=, name= (repeatable; default: one target here)",
    )
    fleet.add_argument(
        "--cluster",
        choices=ENGINES,
        default="local",
        help="where jobs run: local (default: this machine) or slurm",
    )
    fleet.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the fleet's report folder (default: STORE/reports/<fleet id>)",
    )
    fleet.add_argument(
        "--jobs-dir",
        default=None,
        help="where submitit keeps each job's script, logs and pickles: a folder only you can "
        "write, at the same path on every node (default: ~/.cache/gpubench/fleet)",
    )
    fleet.add_argument("--poll-seconds", type=float, default=POLL_S, help=argparse.SUPPRESS)


def say(line: str) -> None:
    CONSOLE.say(line)


def run_argv(
    args: argparse.Namespace, store: Path, run_id: str, target: Target, extra: list[str]
) -> list[str]:
    """A target's job's command: `gpubench run` given the fleet's run options as read once here,
    with the store, the run id and the target's device; the report is the fleet's, at the end."""
    run = replace(
        args.run,
        store=str(store),
        run_id=run_id,
        device=(target.device or args.run.device).strip().lower(),
    )
    return [
        sys.executable,
        "-m",
        "gpubench.harness.commands.cli",
        "run",
        f"--{RUN_OPTIONS_FLAG}={run.to_json()}",
        "--no-report",
        *extra,
    ]


def make_executor(engine: str, folder: Path, target: Target) -> Any:
    # here, not at the top: `gpubench --help` does not need it
    import submitit

    if engine == "slurm":
        # a timed-out benchmark times out again
        executor = submitit.SlurmExecutor(folder=folder, max_num_timeout=0)
        # --no-requeue: a node lost mid-run made Slurm requeue the job, whose second start was
        # refused (its run id exists) and read as a usage error; ended, it is named `its node
        # failed`, its rows kept.
        executor.update_parameters(
            signal_delay_s=SIGNAL_DELAY_S,
            additional_parameters={"no_requeue": True},
            **target.slurm_parameters(),
        )
    else:
        executor = submitit.LocalExecutor(folder=folder, max_num_timeout=0)
        executor.update_parameters(timeout_min=target.time_min, signal_delay_s=SIGNAL_DELAY_S)
    return executor


@contextmanager
def stderr_into(path: Path) -> Iterator[None]:
    """submitit's local controller, started with this stderr in the terminal's process group,
    printed its KeyboardInterrupt traceback among the fleet's lines on Ctrl-C: started with stderr
    in a log, it stays there."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    try:
        os.dup2(log, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(log)


def submit(fleet_job: FleetJob, engine: str, folder: Path, argv: list[str]) -> None:
    from submitit.helpers import CommandFunction

    try:
        # changed since the fleet began (a chmod)? The job loads its command from there
        check_folder(folder)
        executor = make_executor(engine, folder, fleet_job.target)
        # submitit's local controller sets CUDA_VISIBLE_DEVICES from gpus_per_node (none: "") for
        # its task: a local run gets this machine's environment as the user gave it (or a GPU node
        # measures its CPU), and stops with us
        env = (
            dict(os.environ, **{STOP_WITH_ENV: process_token(os.getpid())})
            if engine == "local"
            else None
        )
        # cwd: the folder holding gpubench, where `python -m gpubench...` finds it when it is not
        # installed
        command = CommandFunction(argv, verbose=True, cwd=str(IMPORT_ROOT), env=env)
        with stderr_into(folder / "controller.log") if engine == "local" else nullcontext():
            fleet_job.job = executor.submit(command)
    # sbatch refused it or could not run: submitit raises several types
    except Exception as error:
        fleet_job.state, fleet_job.reason = (
            FAILED,
            f"not submitted: {' '.join(str(error).split())[:400]}",
        )
        say(f"[{fleet_job.target.name}]: FAILED — {fleet_job.reason}")
        return
    fleet_job.state = "queued"


def announce(fleet_job: FleetJob, store: Path) -> None:
    if fleet_job.state == DONE:
        say(f"{fleet_job.label}: done -> {fleet_job.csv}")
    elif fleet_job.state == FAILED:
        kept = f"; {fleet_job.csv} keeps the rows measured" if fleet_job.csv else ""
        say(
            f"{fleet_job.label}: FAILED — {fleet_job.reason}{kept}\n"
            + "\n".join("    " + line for line in fleet_job.log_tail.splitlines())
        )
    elif fleet_job.state == QUEUED and fleet_job.stuck:
        say(
            f"{fleet_job.label}: queued, and squeue says {fleet_job.stuck}: no node of the "
            "partition can start it as asked — check the target's cpus=, gres=, time=, "
            "constraint=, nodelist= (Ctrl-C cancels)"
        )
    else:
        say(f"{fleet_job.label}: {fleet_job.state}")


def find_csv(fleet_job: FleetJob, store: Path) -> None:
    """The CSV the job's run wrote, in whichever machine folder it landed (store.find_run: the
    user's own only); each one left out is named; a job that ran but left none failed."""
    found = find_run(store, fleet_job.run_id)
    fleet_job.csv = found.csv
    for line in found.ignored:
        say(f"{fleet_job.label}: {line}")
    if fleet_job.state == DONE and fleet_job.csv is None:
        fleet_job.state = FAILED
        fleet_job.reason = (
            f"the run finished but no {fleet_job.run_id}.csv in {store} is surely the one it wrote "
            "(said above)"
            if found.ignored
            else f"the run finished but {fleet_job.run_id}.csv is in no machine folder of {store}"
        )


def drive(
    jobs: list[FleetJob],
    engine: str,
    store: Path,
    submit_job: Callable[[FleetJob], None],
    poll_s: float,
) -> None:
    """Submit (all at once on Slurm, one after another here) and report each change of state."""
    seen: dict[str, str] = {}
    while not all(j.finished for j in jobs):
        for fleet_job in jobs:
            busy = any(j.live for j in jobs)
            if fleet_job.state == WAITING and (engine == "slurm" or not busy):
                with signals_deferred():
                    submit_job(fleet_job)
        update(jobs, engine, store)
        for fleet_job in jobs:
            if fleet_job.finished and not seen.get(fleet_job.target.name, "").startswith(
                (DONE, FAILED)
            ):
                find_csv(fleet_job, store)
            if fleet_job.job is not None and seen.get(fleet_job.target.name) != fleet_job.progress:
                seen[fleet_job.target.name] = fleet_job.progress
                announce(fleet_job, store)
        if not all(j.finished for j in jobs):
            time.sleep(poll_s)


def check_args(args: argparse.Namespace, extra: list[str]) -> list[Target]:
    if args.store is None:
        raise UsageError(
            "gpubench fleet needs --store STORE: the folder every job writes into "
            "(on a cluster, one every node sees)"
        )
    # an unset shell variable: the jobs would write into the current folder
    if not str(args.store).strip():
        raise UsageError("--store is empty — pass the store's folder (it is created if missing)")
    # an unset shell variable: the current folder
    if args.jobs_dir is not None and not args.jobs_dir.strip():
        raise UsageError(
            "--jobs-dir is empty — pass a folder only you can write, "
            "or leave --jobs-dir out for ~/.cache/gpubench/fleet"
        )
    if args.results_dir != RESULTS_DIR_DEFAULT:
        raise UsageError(
            "--results-dir does not apply to a fleet: every job writes into --store "
            "STORE/<machine>/ — drop --results-dir"
        )
    if args.run_id is not None:
        raise UsageError(
            "--run-id does not apply to a fleet: each job's run id is <fleet id>-<target name> "
            "— drop --run-id"
        )
    owned = own_options(extra)
    # passed to pytest they overrode the job's store or run id: its rows went where the fleet never
    # looks
    if owned:
        raise UsageError(
            f"{owned[0]} is pytest's form of a gpubench option: the fleet sets the store, run id "
            "and build of each job — drop it, and pass run options as gpubench fleet's own "
            "(--profile, --device, ...)"
        )
    missing = (
        [name for name in SLURM_CLIENTS if shutil.which(name) is None]
        if args.cluster == "slurm"
        else []
    )
    if missing:
        raise UsageError(
            f"--cluster slurm needs {', '.join(SLURM_CLIENTS)} on PATH ({', '.join(missing)} "
            "missing) — run it where Slurm's clients are (a login node), or leave --cluster out "
            "to run here"
        )
    check_run_options(args)
    targets = parse_targets(args.target)
    if args.cluster == "local":
        for target in targets:
            if target.slurm_only():
                say(
                    f"[{target.name}] runs here (no --cluster): {', '.join(target.slurm_only())} "
                    "apply under --cluster slurm"
                )
    return targets


def check_run_options(args: argparse.Namespace) -> None:
    """The run options read once, before any job is submitted: each job gets them as this value."""
    try:
        args.run = read_options(args)
    except UsageError as error:
        raise UsageError(f"{error} (nothing was submitted)") from None


def prepare_store(store: Path) -> None:
    """The store, writable, before any job: a store that is a file, read-only or full failed every
    target one by one as `not submitted: [Errno ...]`."""
    try:
        refuse_link(store, "--store", STORE_FIX)
    except RefusedPath as error:
        raise UsageError(str(error)) from None
    if store.exists() and not store.is_dir():
        raise UsageError(
            f"--store {store} is not a folder — pass a folder (it is created if missing)"
        )
    try:
        make_folders(store)
        handle, probe = tempfile.mkstemp(dir=store, prefix=".probe-")
        try:
            os.write(handle, b"gpubench fleet: can this store hold a job's files?\n" * 64)
        finally:
            os.close(handle)
            os.unlink(probe)
    except OSError as error:
        if error.errno == errno.ENOSPC:
            raise StoreFull(
                f"--store {store} is full: nothing was submitted — free space there or pass "
                "another --store"
            ) from None
        raise UsageError(
            f"--store {store} cannot be written ({error.strerror}): nothing was submitted — pass a "
            "folder you can write to"
        ) from None


def reports_link(store: Path) -> str | None:
    """The line refusing STORE/reports when it is a link: in a team's store, a member could point it
    at a folder of theirs, and the fleet's report would be written there, theirs to change."""
    folder = store / REPORTS_FOLDER
    if not folder.is_symlink():
        return None
    return link_line(
        folder,
        "the store's reports folder",
        "remove the link (the fleet makes the folder), or pass --out",
    )


class StoreFull(UsageError):
    """The store has no room for a job's files."""


@contextmanager
def signals_deferred() -> Iterator[None]:
    """A stop signal while sbatch submits waits until submitit returns the job: taken mid-call, it
    killed sbatch after the job was queued, which then ran on uncancelled while the fleet said
    `nothing was measured`."""
    caught: list[int] = []
    with handlers_installed(lambda signum, frame: caught.append(signum)):
        yield
    if caught:
        raise StopSignal(caught[0])


def interrupted(
    jobs: list[FleetJob], engine: str, store: Path, code: int = ExitCode.INTERRUPTED
) -> int:
    """Every live job cancelled, then the rows measured named; a second Ctrl-C meanwhile is ignored
    (it ended the fleet with a traceback)."""
    if live := [j for j in jobs if j.live]:
        say(
            f"cancelling {len(live)} job(s) and waiting until they stop; another Ctrl-C is "
            "ignored meanwhile"
        )
    with handlers_installed(signal.SIG_IGN):
        labels, still_queued = cancel_all(jobs, engine)
        # stopped: a job squeue still lists may yet start, and needs its command
        for fleet_job in jobs:
            if fleet_job.job is not None and str(fleet_job.job.job_id) not in still_queued:
                forget_submission(fleet_job.job)
        for label in labels:
            say(f"{label}: cancelled (interrupted)")
        if still_queued:
            say(
                f"jobs {', '.join(still_queued)} still in squeue 90 s after scancel — check with "
                "squeue and scancel them"
            )
        # one found before is said once
        for fleet_job in (j for j in jobs if j.csv is None):
            find_csv(fleet_job, store)
        kept = ", ".join(str(j.csv) for j in jobs if j.csv is not None)
        say(
            f"interrupted: the rows measured are kept in {kept}"
            if kept
            else "interrupted: nothing was measured"
        )
        return code


def summary_and_report(jobs: list[FleetJob], store: Path, out: Path) -> int:
    from gpubench.reports.render.build import build_report

    done = [j for j in jobs if j.state == DONE]
    say(
        f"{len(done)} of {len(jobs)} targets done"
        + "".join(f"; {j.target.name} FAILED ({j.reason})" for j in jobs if j.state == FAILED)
    )
    # a failed run's whole rows count too
    csvs = [j.csv for j in jobs if j.csv is not None]
    if not csvs:
        say("no run wrote results: no report")
        return ExitCode.FAILED
    rebuild = (
        "the rows measured are kept — build it with: gpubench report "
        f"{' '.join(str(csv) for csv in csvs)} --out <folder>"
    )
    # made a link while the jobs ran
    if out.parent == store / REPORTS_FOLDER and reports_link(store):
        say(f"report not built: {reports_link(store)}; {rebuild}")
        return ExitCode.FAILED
    try:
        report = build_report(csvs, out, baseline=None)
    except UsageError as error:
        say(f"report not built: {error}; {rebuild}")
        return ExitCode.FAILED
    except StopSignal as stop:
        say(f"interrupted while building the report; {rebuild}")
        return stop.code
    say(f"report of {len(csvs)} runs -> {report}")
    return ExitCode.OK if len(done) == len(jobs) else ExitCode.FAILED


def run_from_args(args: argparse.Namespace, extra: list[str]) -> int:
    from gpubench.harness.records.results import new_run_id

    store = Path(args.store).absolute() if args.store is not None else Path()
    fleet_id = new_run_id()
    jobs_dir = Path(args.jobs_dir) if args.jobs_dir else default_jobs_dir()
    try:
        targets = check_args(args, extra)
        prepare_store(store)
        if args.out is None and reports_link(store):
            raise UsageError(f"{reports_link(store)}: nothing was submitted")
        refuse_link(jobs_dir, "--jobs-dir", "pass --jobs-dir with the folder itself")
        logs = private_folder(jobs_dir.absolute() / fleet_id)
    except UsageError as error:
        return fail(
            str(error), ExitCode.RESULTS_FULL if isinstance(error, StoreFull) else ExitCode.ERROR
        )
    except RefusedPath as error:
        return fail(str(error))
    except OSError as error:
        return fail(
            f"--jobs-dir {jobs_dir} cannot be made ({error.strerror or error}) — "
            "pass a folder you can write to"
        )
    jobs = [FleetJob(target, f"{fleet_id}-{target.name}") for target in targets]
    say(f"{fleet_id}: {len(jobs)} target(s) on {args.cluster}; store {store}; job logs in {logs}")
    # each stop signal raises StopSignal until the fleet's report is written
    with stops_raised():
        try:
            drive(
                jobs,
                args.cluster,
                store,
                lambda j: submit(
                    j, args.cluster, logs, run_argv(args, store, j.run_id, j.target, extra)
                ),
                args.poll_seconds,
            )
        except KeyboardInterrupt as stop:
            return interrupted(
                jobs, args.cluster, store, getattr(stop, "code", ExitCode.INTERRUPTED)
            )
        return summary_and_report(jobs, store, args.out or store / REPORTS_FOLDER / fleet_id)
