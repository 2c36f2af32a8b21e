"""`gpubench fleet`: the suite on many targets, one job per target, every job writing into one
results store; then one report of the whole fleet. Without --cluster the targets run here, one
after another (two runs at once on one machine would measure each other); with --cluster slurm
every target is submitted at once through submitit and Slurm places them."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.fleet import DONE, ENGINES, FAILED, WAITING, FleetError, FleetJob, Target, cancel_all, parse_targets, update
from harness.options import RESULTS_DIR_DEFAULT, RUN_OPTIONS, add_to_parser
from harness.store import LOGS_FOLDER, REPORTS_FOLDER, find_run

SUITE_ROOT = Path(__file__).resolve().parent.parent
POLL_S = 2.0
INTERRUPTED_EXIT = 130
PASSED_BY_FLEET = ("store", "run_id", "results_dir")  # set per job, not passed through


def add_fleet_parser(sub: argparse._SubParsersAction) -> None:
    fleet = sub.add_parser("fleet", help="run the suite on many targets (Slurm through submitit, or here), into one results store, then one report",
                           description="One job per --target, each running `gpubench run --store STORE` where it lands, then one report of "
                                       "every run. Without --cluster the targets run on this machine, one after another. Arguments gpubench "
                                       "does not know are passed to each run's pytest (e.g. -k matmul, -m 'not slow').")
    add_to_parser(fleet)
    fleet.add_argument("--target", action="append", metavar="KEY=VALUE,...",
                       help="one job: partition=, gres= (gpu:N), time= (minutes or H:MM:SS), constraint=, nodelist=, cpus=, device=, name= "
                            "(repeatable; default: one target here)")
    fleet.add_argument("--cluster", choices=ENGINES, default="local", help="where jobs run: local (default: this machine) or slurm")
    fleet.add_argument("--out", type=Path, default=None, help="the fleet's report folder (default: STORE/reports/<fleet id>)")
    fleet.add_argument("--poll-seconds", type=float, default=POLL_S, help=argparse.SUPPRESS)


def say(line: str) -> None:
    print(f"gpubench fleet: {line}", flush=True)


def run_argv(args: argparse.Namespace, store: Path, run_id: str, target: Target, extra: list[str]) -> list[str]:
    """The command a target's job runs: `gpubench run` with the fleet's run options, the store, the
    run id and the target's device; the report is the fleet's, at the end."""
    flags: list[str] = []
    for option in RUN_OPTIONS:
        value = target.device if option.dest == "device" and target.device else getattr(args, option.dest)
        if option.dest in PASSED_BY_FLEET or value is None or value == option.default:
            continue
        flags += [option.flag] if option.type is None else [option.flag, str(value)]
    return [sys.executable, "-m", "harness.cli", "run", "--store", str(store), "--run-id", run_id, "--no-report", *flags, *extra]


def make_executor(engine: str, folder: Path, target: Target) -> Any:
    import submitit  # here, not at the top: `gpubench --help` does not need it

    if engine == "slurm":
        executor = submitit.SlurmExecutor(folder=folder, max_num_timeout=0)  # a timed-out benchmark would time out again
        executor.update_parameters(**target.slurm_parameters())
    else:
        executor = submitit.LocalExecutor(folder=folder, max_num_timeout=0)
        executor.update_parameters(timeout_min=target.time_min)
    return executor


def submit(fleet_job: FleetJob, engine: str, folder: Path, argv: list[str]) -> None:
    from submitit.helpers import CommandFunction

    try:
        executor = make_executor(engine, folder, fleet_job.target)
        fleet_job.job = executor.submit(CommandFunction(argv, verbose=True, cwd=str(SUITE_ROOT)))
    except Exception as error:  # noqa: BLE001 - sbatch refused it (an unknown partition, a gres the cluster lacks) or could not run: submitit raises several types
        fleet_job.state, fleet_job.reason = FAILED, f"not submitted: {' '.join(str(error).split())[:400]}"
        say(f"[{fleet_job.target.name}]: FAILED — {fleet_job.reason}")
        return
    fleet_job.state = "queued"


def announce(fleet_job: FleetJob, store: Path) -> None:
    if fleet_job.state == DONE:
        say(f"{fleet_job.label}: done -> {fleet_job.csv}")
    elif fleet_job.state == FAILED:
        kept = f"; {fleet_job.csv} keeps the rows measured" if fleet_job.csv else ""
        say(f"{fleet_job.label}: FAILED — {fleet_job.reason}{kept}\n" + "\n".join("    " + line for line in fleet_job.log_tail.splitlines()))
    else:
        say(f"{fleet_job.label}: {fleet_job.state}")


def find_csv(fleet_job: FleetJob, store: Path) -> None:
    """The run's CSV in whichever machine folder it landed; a job that ran but left none failed."""
    fleet_job.csv = find_run(store, fleet_job.run_id)
    if fleet_job.state == DONE and fleet_job.csv is None:
        fleet_job.state, fleet_job.reason = FAILED, f"the run finished but {fleet_job.run_id}.csv is in no machine folder of {store}"


def drive(jobs: list[FleetJob], engine: str, store: Path, submit_job: Callable[[FleetJob], None], poll_s: float) -> None:
    """Submit (all at once on Slurm, one after another here) and report each change of state."""
    seen: dict[str, str] = {}
    while not all(j.finished for j in jobs):
        for fleet_job in jobs:
            busy = any(j.job is not None and not j.finished for j in jobs)
            if fleet_job.state == WAITING and (engine == "slurm" or not busy):
                submit_job(fleet_job)
        update(jobs, engine)
        for fleet_job in jobs:
            if fleet_job.finished and seen.get(fleet_job.target.name) not in (DONE, FAILED):
                find_csv(fleet_job, store)
            if fleet_job.job is not None and seen.get(fleet_job.target.name) != fleet_job.state:
                seen[fleet_job.target.name] = fleet_job.state
                announce(fleet_job, store)
        if not all(j.finished for j in jobs):
            time.sleep(poll_s)


def check_args(args: argparse.Namespace) -> list[Target]:
    if args.store is None:
        raise FleetError("gpubench fleet needs --store STORE: the folder every job writes into (on a cluster, one every node sees)")
    if args.results_dir != RESULTS_DIR_DEFAULT:
        raise FleetError("--results-dir does not apply to a fleet: every job writes into --store STORE/<machine>/ — drop --results-dir")
    if args.run_id is not None:
        raise FleetError("--run-id does not apply to a fleet: each job's run id is <fleet id>-<target name> — drop --run-id")
    targets = parse_targets(args.target)
    if args.cluster == "local":
        for target in targets:
            if target.slurm_only():
                say(f"[{target.name}] runs here (no --cluster): {', '.join(target.slurm_only())} apply under --cluster slurm")
    return targets


def interrupted(jobs: list[FleetJob], engine: str, store: Path) -> int:
    cancelled = cancel_all(jobs, engine)
    for label in cancelled.labels:
        say(f"{label}: cancelled (interrupted)")
    if cancelled.still_queued:
        say(f"jobs {', '.join(cancelled.still_queued)} still in squeue 90 s after scancel — check with squeue and scancel them")
    for fleet_job in jobs:
        find_csv(fleet_job, store)
    kept = [str(j.csv) for j in jobs if j.csv is not None]
    say("interrupted" + (f": the rows measured are kept in {', '.join(kept)}" if kept else ": nothing was measured"))
    return INTERRUPTED_EXIT


def summary_and_report(jobs: list[FleetJob], store: Path, out: Path) -> int:
    from reports.build import ReportError, build_report

    done = [j for j in jobs if j.state == DONE]
    say(f"{len(done)} of {len(jobs)} targets done" + "".join(f"; {j.target.name} FAILED ({j.reason})" for j in jobs if j.state == FAILED))
    csvs = [j.csv for j in jobs if j.csv is not None]  # a failed run's whole rows count too
    if not csvs:
        say("no run wrote results: no report")
        return 1
    try:
        report = build_report(csvs, out, baseline=None)
    except ReportError as error:
        say(f"report not built: {error}")
        return 1
    say(f"report of {len(csvs)} runs -> {report}")
    return 0 if len(done) == len(jobs) else 1


def raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # SIGTERM (a scheduler, kill): cancel the jobs as Ctrl-C does


def cmd_fleet(args: argparse.Namespace, extra: list[str]) -> int:
    from harness.cli import fail
    from harness.results import new_run_id

    try:
        targets = check_args(args)
    except FleetError as error:
        return fail(str(error))
    store = Path(args.store).absolute()
    fleet_id = new_run_id()
    jobs = [FleetJob(target, f"{fleet_id}-{target.name}") for target in targets]
    logs = store / LOGS_FOLDER / fleet_id
    say(f"{fleet_id}: {len(jobs)} target(s) on {args.cluster}; store {store}; job logs in {logs}")
    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        drive(jobs, args.cluster, store, lambda j: submit(j, args.cluster, logs, run_argv(args, store, j.run_id, j.target, extra)), args.poll_seconds)
    except KeyboardInterrupt:
        return interrupted(jobs, args.cluster, store)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return summary_and_report(jobs, store, args.out or store / REPORTS_FOLDER / fleet_id)
