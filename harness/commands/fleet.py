"""`gpubench fleet`'s targets (`--target KEY=VALUE,...`: the time limit, CPUs, the run's device, and
any sbatch option as submitit names it: partition, gres, mem, ...), parsed and checked before any
job is submitted, and the watch over each target's job (queued, running, done, failed and why).
Slurm states come from `squeue -t all`, not submitit's `sacct`, which needs an accounting database
many small clusters do not run. How a run ended is the exit code it recorded in the store, never
submitit's result pickle (loading one can run code); without a record, squeue's last word or the
job's log says why. Torch-free."""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpubench.harness.core.exits import UsageError, meaning_of
from gpubench.harness.records.store import recorded_exit, safe_name

DEFAULT_TIME_MIN = 60
# gpubench's; any other key is an sbatch option, passed to submitit
OWN_KEYS = ("name", "time", "cpus", "device")
# submitit's parameters that are no sbatch option (lists, flags of its own) or that the fleet sets
# itself
NOT_SBATCH = {
    "additional_parameters",
    "array_parallelism",
    "job_name",
    "num_gpus",
    "setup",
    "signal_delay_s",
    "srun_args",
    "stderr_to_stdout",
    "teardown",
    "use_srun",
}
# partitions, node lists and constraints run to tens of characters
MAX_TARGET_CHARS = 1024
# a year: past it, a time limit is a typo (Slurm took 99999999999999999999 silently)
MAX_TIME_MIN = 365 * 24 * 60


@dataclass(frozen=True)
class Target:
    """Where one job runs (its sbatch options in `slurm`, as submitit names them); `device` is the
    run's --device."""

    name: str
    time_min: int = DEFAULT_TIME_MIN
    cpus: int | None = None
    device: str | None = None
    slurm: dict[str, str] = field(default_factory=dict)

    def slurm_parameters(self) -> dict[str, Any]:
        """submitit.SlurmExecutor's parameters (sbatch's --partition, --gres, --time, ...)."""
        cpus = {} if self.cpus is None else {"cpus_per_task": self.cpus}
        return {**self.slurm, **cpus, "job_name": f"gpubench-{self.name}", "time": self.time_min}

    def slurm_only(self) -> list[str]:
        return [*self.slurm, *(["cpus"] if self.cpus is not None else [])]


def ascii_digits(text: str) -> bool:
    """0-9 only: str.isdigit takes '²' and '٣', which int() then refuses or reads as another
    number."""
    return text.isascii() and text.isdigit()


def parse_minutes(text: str) -> int:
    """`30` (minutes), `2:00:00` or `90:00` (Slurm's H:MM:SS and MM:SS) -> whole minutes."""
    parts = text.split(":")
    if not all(ascii_digits(part) for part in parts) or not 1 <= len(parts) <= 3:
        raise UsageError(f"time={text}: give minutes (time=30) or H:MM:SS (time=2:00:00)")
    seconds = sum(
        int(part) * scale
        for part, scale in zip(reversed(parts), (1, 60, 3600) if len(parts) > 1 else (60,))
    )
    if seconds < 60:
        raise UsageError(
            f"time={text}: a time limit under a minute cannot run the suite — give time=30 or more"
        )
    if seconds > MAX_TIME_MIN * 60:
        raise UsageError(
            f"time={text}: over a year — give minutes (time=30) or H:MM:SS (time=2:00:00)"
        )
    return -(-seconds // 60)


def parse_target(text: str, index: int) -> Target:
    """`partition=gpu,gres=gpu:1,time=30`; named by name=, else the partition, node list, constraint
    or device."""
    fields = target_fields(text)
    cpus = fields.get("cpus")
    if cpus is not None and not ascii_digits(cpus):
        raise UsageError(f"--target {text!r}: cpus={cpus} is not a whole number")
    label = next(
        (
            fields[key]
            for key in ("name", "partition", "nodelist", "constraint", "device")
            if key in fields
        ),
        # target_fields refuses an empty value
        f"target{index}",
    )
    return Target(
        name=safe_name(label)[:40],
        time_min=parse_minutes(fields["time"]) if "time" in fields else DEFAULT_TIME_MIN,
        cpus=int(cpus) if cpus else None,
        device=fields.get("device"),
        slurm={key: value for key, value in fields.items() if key not in OWN_KEYS},
    )


def target_fields(text: str) -> dict[str, str]:
    """key -> value of one --target; an empty one, an unknown key (a misspelt one failed every job)
    or a key given twice is refused (the last of two silently won, and an empty --target ran a job
    nobody asked for)."""
    from submitit import SlurmExecutor

    # its update_parameters refuses others
    sbatch = SlurmExecutor._valid_parameters() - NOT_SBATCH - {*OWN_KEYS}
    fields: dict[str, str] = {}
    # named by its start: the whole of it filled the terminal, twice
    if len(text) > MAX_TARGET_CHARS:
        raise UsageError(
            f"--target {text[:40]!r}... is {len(text)} characters long: no target needs more than "
            f"{MAX_TARGET_CHARS} — check how it was made"
        )
    items = [part.strip() for part in text.split(",") if part.strip()]
    if not items:
        raise UsageError(
            f"--target {text!r} is empty — give key=value pairs (--target partition=gpu,time=30), "
            "or no --target for one job here"
        )
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not value or key not in {*OWN_KEYS, *sbatch}:
            raise UsageError(
                f"--target {text!r}: {item!r} is not one of "
                f"{', '.join(k + '=' for k in OWN_KEYS)} nor an sbatch option as submitit names "
                f"it ({', '.join(sorted(sbatch))}) — e.g. --target "
                "partition=gpu,gres=gpu:1,time=30"
            )
        if key in fields:
            raise UsageError(f"--target {text!r}: {key}= is given twice — give it once")
        unprintable = [char for char in value if not char.isprintable()]
        # a control character went on into the sbatch script, where sbatch refused it without naming
        # it
        if unprintable:
            raise UsageError(
                f"--target {text!r}: {key}={value!r} holds the control character "
                f"{unprintable[0]!r} — give plain text"
            )
        foreign = [char for char in value if not char.isascii()]
        # 'gрu' (Cyrillic р) went to sbatch, refused as if gpu; name= is made file-safe, cpus= and
        # time= are numbers
        if foreign and key not in ("name", "cpus", "time"):
            raise UsageError(
                f"--target {text!r}: {key}={value} holds {foreign[0]!r} "
                f"(U+{ord(foreign[0]):04X}), which is not ASCII: Slurm and torch name nothing so "
                "— type the value in ASCII"
            )
        fields[key] = value
    return fields


def parse_targets(texts: list[str] | None) -> list[Target]:
    """The targets in order; none given: one on this machine. Names must differ (they name the
    runs)."""
    targets = [parse_target(text, index + 1) for index, text in enumerate(texts or ["name=local"])]
    names = [target.name for target in targets]
    if twice := next((name for index, name in enumerate(names) if name in names[:index]), None):
        raise UsageError(
            f"two targets are named {twice!r} — give each its own name=, "
            "e.g. --target partition=gpu,name=gpu-b"
        )
    return targets


ENGINES = ("local", "slurm")
# submitit's USR2 before the limit ends a job it may not requeue: 90 s by default, all of time=1
SIGNAL_DELAY_S = 20
# a job gone from the queue: how long its exit record may take to appear (NFS)
RESULT_GRACE_S = 15.0
LOG_TAIL_LINES = 12

WAITING, QUEUED, RUNNING, DONE, FAILED = "waiting", "queued", "running", "done", "failed"

# squeue's job states (man squeue, JOB STATE CODES): still in the queue, or ended and why.
ACTIVE_STATES = {
    **dict.fromkeys(
        (
            "PENDING",
            "CONFIGURING",
            "REQUEUED",
            "REQUEUE_FED",
            "REQUEUE_HOLD",
            "RESV_DEL_HOLD",
            "SPECIAL_EXIT",
        ),
        QUEUED,
    ),
    **dict.fromkeys(
        ("RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT", "RESIZING"),
        RUNNING,
    ),
}
ENDED_REASONS = {
    "CANCELLED": "cancelled (scancel, or an administrator)",
    "TIMEOUT": "timed out (the target's time limit)",
    "NODE_FAIL": "its node failed",
    "OUT_OF_MEMORY": "out of memory",
    "PREEMPTED": "preempted by the scheduler",
    "BOOT_FAIL": "its node failed to boot",
    "DEADLINE": "missed its deadline",
    "REVOKED": "revoked by the federation",
}
STORE_FULL = "the store filled up (No space left on device) — free space there"
# Slurm's words in a job's log, then submitit's: its USR2 handler ends a job it may not requeue
# before Slurm does.
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
STUCK_REASONS = {
    "PartitionConfig",
    "PartitionTimeLimit",
    "PartitionNodeLimit",
    "BadConstraints",
    "ReqNodeNotAvail",
    "PartitionDown",
    "PartitionInactive",
    "InvalidQOS",
    "InvalidAccount",
    "QOSMaxWallDurationPerJobLimit",
    "JobHeldAdmin",
    "JobHeldUser",
}
SUBMITIT_ERROR = re.compile(r"submitit\.core\.utils\.\w+Error: ")
# submitit's trace of a failed command, in the job's log
EXIT_STATUS = re.compile(r"non-zero exit status (-?\d+)")
# gpubench run's exits 2 and 4 end with its one error line (a usage error, an input it refused): the
# log says which. " run": an older gpubench's argparse; "ERROR:": a build's refusal, pytest's
# UsageError line
RUN_ERROR = re.compile(r"^(?:gpubench( run)?: error|ERROR): (.+)$", re.MULTILINE)
LINE_EXITS = (2, 4)


@dataclass
class FleetJob:
    """One target's job and what is known of it."""

    target: Target
    run_id: str
    # the submitit Job, once submitted
    job: Any = None
    # not yet submitted
    state: str = WAITING
    reason: str = ""
    log_tail: str = ""
    csv: Path | None = None
    # when it was first seen out of the queue without a result
    gone_since: float | None = None
    # squeue's reason for a pending job that no wait will start (PartitionConfig, ...)
    stuck: str = ""

    @property
    def finished(self) -> bool:
        return self.state in (DONE, FAILED)

    @property
    def live(self) -> bool:
        """Submitted and not yet finished: what an update polls and a cancel stops."""
        return self.job is not None and not self.finished

    @property
    def progress(self) -> str:
        """What a change of is announced on: the state, and why a queued job cannot start."""
        return f"{self.state} {self.stuck}"

    @property
    def label(self) -> str:
        return f"[{self.target.name}]" + (f" job {self.job.job_id}" if self.job is not None else "")


def squeue_states(job_ids: list[str]) -> dict[str, str] | None:
    """job id -> squeue's `STATE|REASON` for those of `job_ids` it still knows (finished ones for
    MinJobAge, 300 s by default); None when squeue itself failed (the controller busy: ask again
    later)."""
    try:
        out = subprocess.run(
            ["squeue", "-h", "-t", "all", "-o", "%i|%T|%r"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
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


def log_tail(job: Any, lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of the job's error stream, then of its output stream (where pytest reports),
    without submitit's traceback: its dozen lines of frames before `FailedJobError: <the command's
    stderr>` hid the run's one-line error."""
    parts = []
    for name, text in read_log(job).items():
        kept = [line for line in SUBMITIT_ERROR.split(text)[-1].splitlines() if line.strip()][
            -lines:
        ]
        if kept:
            parts.append(f"--- {name} (last {len(kept)} lines)\n" + "\n".join(kept))
    return "\n".join(parts) or "(the job wrote no log)"


def whole_log(job: Any) -> str:
    return "\n".join(read_log(job).values())


def reason_from_log(text: str) -> str:
    """Why a job that recorded no exit code ended: the reason Slurm wrote into its log (`CANCELLED
    AT ... DUE TO ...`), the marker found last (an earlier ENOSPC warning about a cache folder does
    not make a later scancel a full store); else the exit status submitit's trace of the command
    names (a run refused before it had a folder)."""
    if found := [(text.rfind(marker), reason) for marker, reason in LOG_REASONS if marker in text]:
        return max(found)[1]
    statuses = EXIT_STATUS.findall(text)
    return (
        exited(int(statuses[-1]), text)
        if statuses
        else "ended without a result (killed, or its node lost)"
    )


def exited(code: int, log: str) -> str:
    """`gpubench run exited N (what N means)`; for 2 and 4, the run's own last error line in its
    log."""
    meaning = meaning_of(code)
    usage, line = (RUN_ERROR.findall(log) or [("", "")])[-1]
    # 2 names no cause of its own: its line, or nothing
    if code in LINE_EXITS and (line or code == 2):
        meaning = ("usage error: " if usage else "") + line.strip()[:200]
    return f"gpubench run exited {code}" + (f" ({meaning})" if meaning else "")


def settle(
    fleet_job: FleetJob,
    queue_state: str | None,
    store: Path,
    now: float,
    grace_s: float = RESULT_GRACE_S,
) -> None:
    """A job that left the active states, done or failed by the exit code its run recorded (Slurm's
    word on a cancel or timeout first); without one, squeue or the job's log says why, after
    `grace_s` (NFS may lag)."""
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
    if fleet_job.finished:
        forget_submission(job)


def forget_submission(job: Any) -> None:
    """An ended job needs its command no more: submitit's pickle of it, which holds the environment
    a local job runs in (tokens, a proxy's password), is removed; its logs and result stay for the
    fleet's lines."""
    # AttributeError: a job that is no submitit Job
    with contextlib.suppress(OSError, AttributeError):
        Path(job.paths.submitted_pickle).unlink(missing_ok=True)


def update(jobs: list[FleetJob], engine: str, store: Path) -> None:
    """Each submitted, unfinished job's state, from squeue (Slurm) or the process (local)."""
    live = [j for j in jobs if j.live]
    if not live:
        return
    now = time.monotonic()
    states = squeue_states([str(j.job.job_id) for j in live]) if engine == "slurm" else {}
    if states is None:
        return
    for fleet_job in live:
        if engine == "slurm":
            state, _, why = states.get(str(fleet_job.job.job_id), "").partition("|")
        # a local run that ended has recorded its exit if it could: no grace
        else:
            state, why = ("RUNNING" if fleet_job.job.state == "RUNNING" else ""), ""
        if state in ACTIVE_STATES:
            fleet_job.state = ACTIVE_STATES[state]
            fleet_job.stuck = why if fleet_job.state == QUEUED and why in STUCK_REASONS else ""
        else:
            settle(
                fleet_job,
                state or None,
                store,
                now,
                grace_s=RESULT_GRACE_S if engine == "slurm" else 0.0,
            )


def stop_local_tree(job_id: str, grace_s: float = 60.0) -> None:
    """SIGINT to the local job's gpubench run, as Ctrl-C would (submitit's cancel orphans it), which
    passes it on to its build: a build signalled by us too read it as a second Ctrl-C. The whole
    tree only before the run has started (the job id is the controller's pid); SIGKILL takes what
    outlives `grace_s`."""
    import psutil

    try:
        root = psutil.Process(int(job_id))
        tree = [root, *root.children(recursive=True)]
    except (psutil.Error, ValueError):
        # already gone
        return
    runs = [process for process in tree if is_gpubench_run(process)]
    # without a run yet: the deepest first
    for process in runs or reversed(tree):
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
    # psutil.Error: gone, or not ours to read
    except Exception:
        return False
    return "gpubench.harness.commands.cli" in argv and "run" in argv


def cancel_all(
    jobs: list[FleetJob], engine: str, wait_s: float = 90.0
) -> tuple[list[str], list[str]]:
    """Cancel every submitted, unfinished job (scancel on Slurm, SIGINT locally); on Slurm, wait
    until squeue no longer lists them as active. (the cancelled jobs' labels, the ids of those
    squeue still lists)"""
    live = [j for j in jobs if j.live]
    for fleet_job in live:
        try:
            if engine == "slurm":
                fleet_job.job.cancel(check=False)
            else:
                stop_local_tree(str(fleet_job.job.job_id))
        # scancel missing: reported below as still queued
        except OSError:
            pass
    labels = [fleet_job.label for fleet_job in live]
    if engine != "slurm" or not live:
        return labels, []
    deadline = time.monotonic() + wait_s
    ids = [str(j.job.job_id) for j in live]
    while time.monotonic() < deadline:
        states = squeue_states(ids)
        # COMPLETING too: squeue still lists it
        active = [
            i for i, state in (states or {}).items() if state.partition("|")[0] in ACTIVE_STATES
        ]
        if states is not None and not active:
            return labels, []
        time.sleep(0.5)
    return labels, ids
