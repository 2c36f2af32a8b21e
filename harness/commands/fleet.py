"""The watch over a `gpubench fleet` job (queued, running, done, failed and why). Slurm states come from
`squeue -t all`, not submitit's `sacct`, which needs an accounting database many small clusters do not run. How a
run ended is the exit code it recorded in the store, never submitit's result pickle (loading one can run code);
without a record, squeue's last word or the job's log says why. Torch-free."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpubench.harness.commands.fleet_targets import Target
from gpubench.harness.core.exits import meaning_of
from gpubench.harness.records.store import recorded_exit

ENGINES = ("local", "slurm")
SIGNAL_DELAY_S = 20  # submitit's USR2 before the limit ends a job it may not requeue: 90 s by default, all of time=1
RESULT_GRACE_S = 15.0  # a job gone from the queue: how long its exit record may take to appear (NFS)
LOG_TAIL_LINES = 12

WAITING, QUEUED, RUNNING, DONE, FAILED = "waiting", "queued", "running", "done", "failed"

# squeue's job states (man squeue, JOB STATE CODES): still in the queue, or ended and why.
ACTIVE_STATES = {"PENDING": QUEUED, "CONFIGURING": QUEUED, "REQUEUED": QUEUED, "REQUEUE_FED": QUEUED,
                 "REQUEUE_HOLD": QUEUED, "RESV_DEL_HOLD": QUEUED, "SPECIAL_EXIT": QUEUED, "RUNNING": RUNNING,
                 "COMPLETING": RUNNING, "SUSPENDED": RUNNING, "STOPPED": RUNNING, "SIGNALING": RUNNING,
                 "STAGE_OUT": RUNNING, "RESIZING": RUNNING}
ENDED_REASONS = {"CANCELLED": "cancelled (scancel, or an administrator)",
                 "TIMEOUT": "timed out (the target's time limit)", "NODE_FAIL": "its node failed",
                 "OUT_OF_MEMORY": "out of memory", "PREEMPTED": "preempted by the scheduler",
                 "BOOT_FAIL": "its node failed to boot", "DEADLINE": "missed its deadline",
                 "REVOKED": "revoked by the federation"}
STORE_FULL = "the store filled up (No space left on device) — free space there"
# Slurm's words in a job's log, then submitit's: its USR2 handler ends a job it may not requeue before Slurm does.
LOG_REASONS = (
    ("DUE TO TIME LIMIT", ENDED_REASONS["TIMEOUT"]),
    ("this job is timed-out", ENDED_REASONS["TIMEOUT"]),
    ("this job is preempted", ENDED_REASONS["PREEMPTED"]),
    ("No space left on device", STORE_FULL),
    ("DUE TO PREEMPTION", ENDED_REASONS["PREEMPTED"]),
    ("DUE TO NODE FAILURE", ENDED_REASONS["NODE_FAIL"]),
    ("CANCELLED AT", ENDED_REASONS["CANCELLED"]),
    ("oom-kill", ENDED_REASONS["OUT_OF_MEMORY"]),
)
# squeue's pending reasons that no wait clears: the target asks what the partition cannot give.
STUCK_REASONS = {"PartitionConfig", "PartitionTimeLimit", "PartitionNodeLimit", "BadConstraints", "ReqNodeNotAvail",
                 "PartitionDown", "PartitionInactive", "InvalidQOS", "InvalidAccount", "QOSMaxWallDurationPerJobLimit",
                 "JobHeldAdmin", "JobHeldUser"}
SUBMITIT_ERROR = re.compile(r"submitit\.core\.utils\.\w+Error: ")
EXIT_STATUS = re.compile(r"non-zero exit status (-?\d+)")  # submitit's trace of a failed command, in the job's log
# gpubench run's exit 2 is argparse's usage error or a line of its own: the job's log says which (run_exit).
RUN_ERROR = re.compile(r"^gpubench( run)?: error: (.+)$", re.MULTILINE)  # argparse's (" run"), or cli.fail's


@dataclass
class FleetJob:
    """One target's job and what is known of it."""

    target: Target
    run_id: str
    job: Any = None  # the submitit Job, once submitted
    state: str = WAITING  # not yet submitted
    reason: str = ""
    log_tail: str = ""
    csv: Path | None = None
    gone_since: float | None = None  # when it was first seen out of the queue without a result
    stuck: str = ""  # squeue's reason for a pending job that no wait will start (PartitionConfig, ...)

    @property
    def finished(self) -> bool:
        return self.state in (DONE, FAILED)

    @property
    def progress(self) -> str:
        """What a change of is announced on: the state, and why a queued job cannot start."""
        return f"{self.state} {self.stuck}"

    @property
    def label(self) -> str:
        return f"[{self.target.name}]" + (f" job {self.job.job_id}" if self.job is not None else "")


def squeue_states(job_ids: list[str]) -> dict[str, str] | None:
    """job id -> squeue's `STATE|REASON` for those of `job_ids` it still knows (finished ones for MinJobAge, 300 s
    by default); None when squeue itself failed (the controller busy: ask again later)."""
    try:
        out = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i|%T|%r"], capture_output=True, text=True,
                             timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    states = dict(line.split("|", 1) for line in out.stdout.splitlines() if "|" in line)
    return {job_id: states[job_id] for job_id in job_ids if job_id in states}


def read_log(job: Any) -> dict[str, str]:
    """The job's error and output streams as written (empty where unreadable)."""
    streams = {}
    for name, read in (("stderr", job.stderr), ("stdout", job.stdout)):
        try:
            streams[name] = read() or ""
        except OSError:
            streams[name] = ""
    return streams


def without_submitit_trace(text: str) -> str:
    """What the run wrote, without submitit's traceback: its dozen lines of frames before `FailedJobError: <the
    command's stderr>` filled the whole tail and hid the run's one-line error."""
    return SUBMITIT_ERROR.split(text)[-1]


def log_tail(job: Any, lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of the job's error stream, then of its output stream (where pytest reports)."""
    parts = []
    for name, text in read_log(job).items():
        kept = [line for line in without_submitit_trace(text).splitlines() if line.strip()][-lines:]
        if kept:
            parts.append(f"--- {name} (last {len(kept)} lines)\n" + "\n".join(kept))
    return "\n".join(parts) or "(the job wrote no log)"


def whole_log(job: Any) -> str:
    return "\n".join(read_log(job).values())


def log_marker(text: str) -> str | None:
    """The reason Slurm wrote into a job's log when it ended it (`CANCELLED AT ... DUE TO ...`): the marker found
    last (an earlier ENOSPC warning about a cache folder does not make a later scancel a full store)."""
    found = [(text.rfind(marker), reason) for marker, reason in LOG_REASONS if marker in text]
    return max(found)[1] if found else None


def reason_from_log(text: str) -> str:
    """Why a job that recorded no exit code ended: what Slurm wrote into its log, else the exit status submitit's
    trace of the command names (a run refused before it had a folder to record it in)."""
    if marker := log_marker(text):
        return marker
    statuses = EXIT_STATUS.findall(text)
    return exited(int(statuses[-1]), text) if statuses else "ended without a result (killed, or its node lost)"


def exited(code: int, log: str) -> str:
    meaning = run_exit(code, log)
    return f"gpubench run exited {code}" + (f" ({meaning})" if meaning else "")


def run_exit(code: int, log: str) -> str:
    """What an exit code of gpubench run means; for 2, the run's own last error line in its log."""
    if code != 2:
        return meaning_of(code)
    errors = RUN_ERROR.findall(log)
    if not errors:
        return ""
    usage, line = errors[-1]
    return ("usage error: " if usage else "") + line.strip()[:200]


def settle(fleet_job: FleetJob, queue_state: str | None, store: Path, now: float,
           grace_s: float = RESULT_GRACE_S) -> None:
    """A job that left the active states, done or failed by the exit code its run recorded (Slurm's word on a cancel
    or timeout first); without one, squeue or the job's log says why, after `grace_s` (NFS may lag)."""
    job = fleet_job.job
    if fleet_job.gone_since is None:
        fleet_job.gone_since = now
    code = recorded_exit(store, fleet_job.run_id)
    ended = ENDED_REASONS.get(queue_state or "")
    if code == 0:
        fleet_job.state, fleet_job.reason = DONE, ""
    elif code is not None:
        fleet_job.state, fleet_job.reason = FAILED, ended or exited(code, whole_log(job))
    elif ended or now - fleet_job.gone_since >= grace_s:
        fleet_job.state, fleet_job.reason = FAILED, ended or reason_from_log(whole_log(job))
    if fleet_job.state == FAILED:
        fleet_job.log_tail = log_tail(job)


def update(jobs: list[FleetJob], engine: str, store: Path) -> None:
    """Each submitted, unfinished job's state, from squeue (Slurm) or the process (local)."""
    live = [j for j in jobs if j.job is not None and not j.finished]
    if not live:
        return
    now = time.monotonic()
    if engine == "slurm":
        states = squeue_states([str(j.job.job_id) for j in live])
        if states is None:
            return
        for fleet_job in live:
            state, _, why = states.get(str(fleet_job.job.job_id), "").partition("|")
            if state in ACTIVE_STATES:
                fleet_job.state = ACTIVE_STATES[state]
                fleet_job.stuck = why if fleet_job.state == QUEUED and why in STUCK_REASONS else ""
            else:
                settle(fleet_job, state or None, store, now)
        return
    for fleet_job in live:
        if fleet_job.job.state == "RUNNING":
            fleet_job.state = RUNNING
        else:
            settle(fleet_job, None, store, now, grace_s=0.0)  # a local run that ended has recorded its exit if it could


def stop_local_tree(job_id: str, grace_s: float = 60.0) -> None:
    """SIGINT to the local job's gpubench run, as Ctrl-C would (submitit's cancel orphans it), which passes it on to
    its build: a build signalled by us too read it as a second Ctrl-C. The whole tree only before the run has
    started (the job id is the controller's pid); SIGKILL takes what outlives `grace_s`."""
    import psutil

    try:
        root = psutil.Process(int(job_id))
        tree = [root, *root.children(recursive=True)]
    except (psutil.Error, ValueError):
        return  # already gone
    runs = [process for process in tree if is_gpubench_run(process)]
    for process in runs or reversed(tree):  # without a run yet: the deepest first
        try:
            process.send_signal(signal.SIGINT)
        except psutil.Error:
            continue
    _, alive = psutil.wait_procs(tree, timeout=grace_s)
    for process in alive:
        try:
            process.kill()
        except psutil.Error:
            continue


def is_gpubench_run(process: Any) -> bool:
    try:
        argv = process.cmdline()
    except Exception:  # noqa: BLE001 - psutil.Error: gone, or not ours to read
        return False
    return "gpubench.harness.commands.cli" in argv and "run" in argv


@dataclass
class Cancelled:
    labels: list[str] = field(default_factory=list)
    still_queued: list[str] = field(default_factory=list)


def cancel_all(jobs: list[FleetJob], engine: str, wait_s: float = 90.0) -> Cancelled:
    """Cancel every submitted, unfinished job (scancel on Slurm, SIGINT locally); on Slurm, wait until squeue no
    longer lists them as active."""
    outcome = Cancelled()
    live = [j for j in jobs if j.job is not None and not j.finished]
    for fleet_job in live:
        try:
            if engine == "slurm":
                fleet_job.job.cancel(check=False)
            else:
                stop_local_tree(str(fleet_job.job.job_id))
        except OSError:  # scancel missing: reported below as still queued
            pass
        outcome.labels.append(fleet_job.label)
    if engine != "slurm" or not live:
        return outcome
    deadline = time.monotonic() + wait_s
    ids = [str(j.job.job_id) for j in live]
    while time.monotonic() < deadline:
        states = squeue_states(ids)
        # COMPLETING too: squeue still lists it
        active = [i for i, state in (states or {}).items() if state.partition("|")[0] in ACTIVE_STATES]
        if states is not None and not active:
            return outcome
        time.sleep(0.5)
    outcome.still_queued = ids
    return outcome
