"""Multi-device training: DDP under torchrun against one process, and DataParallel."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar
from collections.abc import Callable

import torch

from gpubench import IMPORT_ROOT
from gpubench.harness.measurement.cases import Case, CaseSkipped
from gpubench.harness.catalog.ddp import SPEC
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.devices.data_source import DataSource, PreloadedLoader
from gpubench.harness.processes.launch import STOPPED_LIMIT_S, Job
from gpubench.harness.processes.torchrun import TorchrunLauncher
from gpubench.harness.measurement.measure import Timed
from gpubench.harness.core.plan import RoundPlan
from gpubench.harness.core.run_budget import MIN_SHARE_S, CaseShare, OverBudget, format_duration
from gpubench.harness.core.stats import SampleStats, median
from gpubench.harness.core.cost_model import Work
from gpubench.harness.measurement.workload import Workload
from gpubench.harness.workloads.models import CNN_EFFICIENCY, CNN_STEP_LAUNCHES, CNN_TRAIN_FLOPS, make_model
from gpubench.harness.workloads.train_loop import Trainer

# Per-rank steps per profile (0 = the full epoch of the rank's shard).
MAX_STEPS = {"smoke": 5, "quick": 40, "full": 0}
PER_RANK_BATCH = 128
MAX_EFFICIENCY = 1.05  # above this, N processes beat N x one process: the measurement is wrong
# A whole torchrun launch (start, warm-up, the steps, teardown) per profile: past it a rank hung
# or died without torchrun noticing, and the launch is killed with every rank.
LAUNCH_TIMEOUT_S = {"smoke": 120, "quick": 600, "full": 3600}
# The ranks' own collective timeout: a peer that stopped answering fails the waiting rank with its
# error (quoted in the case's reason) before the launch is killed without one. Half the launch's,
# at most two minutes below the full profile: a quick case with a silent rank ends within 5 min.
COLLECTIVE_TIMEOUT_S = {"smoke": 60, "quick": 120, "full": 1800}
# A rank whose heartbeat file (ddp_worker.Heartbeat, rewritten every second by a thread) is this
# old stopped responding (SIGSTOP, a frozen process): the launch is killed naming it, first.
HEARTBEAT_STALL_S = STOPPED_LIMIT_S  # the launcher's limit for a stopped build: one table
WORKER_MODULE = "gpubench.harness.workloads.ddp_worker"  # what torchrun starts on every rank
# After a failed launch: a rank whose last heartbeat came this long before the last rank's went
# silent first (the others then timed out waiting for it, or were stopped by torchrun).
SILENT_BEFORE_OTHERS_S = 5.0
WORKDIR_PREFIX = "gpubench-ddp-"
STALE_WORKDIR_S = 24 * 3600  # a workdir this old belongs to no running case (a launch lasts at most an hour)


@dataclass(frozen=True)
class DistributedCase(Case):
    workload: ClassVar[str] = "ddp"
    parallel: str  # ddp | dataparallel
    world_size: int
    backend: str
    batch_size: int  # per rank (ddp) or per GPU share of the global batch (dataparallel)


def cases(ctx: BuildContext) -> list[DistributedCase]:
    nproc, device = ctx.nproc, ctx.device
    backend = "nccl" if device.type == "cuda" else "gloo"
    ddp = [DistributedCase("ddp", n, backend, PER_RANK_BATCH) for n in sorted({1, nproc})]
    dataparallel = [DistributedCase("dataparallel", max(nproc, 2), "single-process", PER_RANK_BATCH)]
    return ddp + dataparallel


def torchrun_command(case: DistributedCase, device: torch.device, data: DataSource, max_steps: int, result_json: Path,
                     collective_timeout_s: float = COLLECTIVE_TIMEOUT_S["full"]) -> list[str]:
    """Rank 0 reports to `result_json`; every rank beats in a folder beside it."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={case.world_size}",
            "-m", WORKER_MODULE, f"--batch-size={case.batch_size}", f"--max-steps={max_steps}",
            f"--device-type={'cuda' if device.type == 'cuda' else 'cpu'}", f"--dataset={data.dataset}",
            f"--data-root={data.root}", f"--result-json={result_json}", f"--timeout-s={collective_timeout_s:g}",
            f"--heartbeat-dir={heartbeat_dir(result_json)}"]


def heartbeat_dir(result_json: Path) -> Path:
    """One folder per launch (the baseline launch shares the case's workdir)."""
    return result_json.with_name(f"{result_json.stem}-heartbeats")


def last_beat_s(folder: Path) -> float | None:
    """When the last rank still beating last beat: the moment the launch ended."""
    beats = read_heartbeats(folder)
    return max((float(beat["time_s"]) for beat in beats.values()), default=None)


def read_heartbeats(folder: Path) -> dict[int, dict[str, Any]]:
    """Each rank's last heartbeat ({"rank", "step", "time_s"}), by rank; a torn file is skipped."""
    beats = {}
    for path in folder.glob("heartbeat-*.json"):
        try:
            beat = json.loads(path.read_text())
            beats[int(beat["rank"])] = beat
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return beats


def silent_rank(folder: Path, stall_s: float, now_s: float | None = None) -> str:
    """'rank 1 stopped responding (no heartbeat for 31 s, at step 1)' for the rank whose heartbeat
    is oldest, when it is older than `stall_s`; '' when every rank still beats."""
    beats = read_heartbeats(folder)
    now_s = time.time() if now_s is None else now_s
    if not beats:
        return ""
    oldest = min(beats.values(), key=lambda beat: float(beat["time_s"]))
    silent_s = now_s - float(oldest["time_s"])
    if silent_s < stall_s:
        return ""
    step = int(oldest.get("step", -1))
    where = f"at step {step}" if step >= 0 else "before its first step"
    return f"rank {oldest['rank']} stopped responding (no heartbeat for {silent_s:.0f} s, {where})"


class LaunchTimedOut(RuntimeError):
    """torchrun ran past its time limit and was killed with its ranks."""


def budgeted_launch(command: list[str], result_json: Path, timeout_s: float, stall_s: float, share: CaseShare | None,
                    run: Callable[[list[str], Path, float, float], dict[str, Any]] | None = None) -> dict[str, Any]:
    """A launch (`run`, default `launch`) that ends with its case's share of a run budget: stopped
    there, it is a skipped case whose row keeps the seconds it ran (the next run under the same
    budget does not start it)."""
    limit_s = timeout_s if share is None else min(timeout_s, max(share.left_s(), MIN_SHARE_S))
    started_s = time.monotonic()
    try:
        return (run or launch)(command, result_json, limit_s, stall_s)
    except LaunchTimedOut:
        if share is None or limit_s >= timeout_s:
            raise
        ran_s = time.monotonic() - started_s
        share_s, budget_s = format_duration(share.share_s), format_duration(share.budget_s)
        raise OverBudget(f"over budget: the launch ran {format_duration(ran_s)} and was stopped at its {share_s} share "
                         f"of the {budget_s} budget — raise --budget or deselect it", ran_s) from None


def launch(command: list[str], result_json: Path, timeout_s: float = LAUNCH_TIMEOUT_S["full"],
           stall_s: float = HEARTBEAT_STALL_S["full"]) -> dict[str, Any]:
    """Run torchrun (gpubench.harness.processes.torchrun.TorchrunLauncher) and read rank 0's report. A rank whose
    heartbeat goes `stall_s` stale ends the launch, named; a failing rank fails the case naming the
    rank, its exit cause and its first error line; a launch past `timeout_s` is killed with all its ranks."""
    # TMPDIR: torchrun's own scratch (torchelastic_* log folders) goes into the case's workdir
    # (result_json's folder), so it is removed with it instead of piling up in the shared /tmp.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(IMPORT_ROOT), os.environ.get("PYTHONPATH")])),
               TMPDIR=str(result_json.parent))
    done = TorchrunLauncher().run(Job(command, env, timeout_s, watch=lambda: silent_rank(heartbeat_dir(result_json), stall_s)))
    output = done.stderr + done.stdout
    if done.stalled:
        raise RuntimeError(f"{done.stalled}: the launch was killed with its ranks (the others waited for it) — a stopped (SIGSTOP), "
                           "swapped-out or frozen process; rerun the case")
    if done.timed_out:
        first = rank_error(output, fallback=False)
        detail = f" (first error: {first})" if first else ""
        raise LaunchTimedOut(f"torchrun timed out after {timeout_s:g} s and was killed with its ranks: a rank hung or died unnoticed{detail} — "
                           "rerun the case; if it hangs again, run ddp_worker under torchrun by hand (README, Multi-process training) to watch the ranks")
    if done.code != 0 or not result_json.exists():  # a rank gone silent (named first) makes a peer time out waiting for it
        cause = root_cause(output)
        silent = silent_rank(heartbeat_dir(result_json), SILENT_BEFORE_OTHERS_S, now_s=last_beat_s(heartbeat_dir(result_json)))
        raise RuntimeError(f"torchrun exited {done.code}: " + "; ".join(filter(None, [silent, cause, rank_error(output, fallback=not cause)])))
    return json.loads(result_json.read_text())


_EXCEPTION_LINE = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception)\b.*?: .+|^\S+: error: .+")
# torchrun's ChildFailedError block: "Root Cause (first observed failure):" then lines like
# "  rank      : 1 (local_rank: 1)" and "  exitcode  : -9 (pid: 1234)".
_ROOT_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)\s*\(local_rank:\s*(\d+)\)", re.MULTILINE)
_ROOT_EXITCODE = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)", re.MULTILINE)


def exit_cause(exitcode: int) -> str:
    """'-9 (SIGKILL)': a negative exit code is the signal that ended the rank."""
    if exitcode >= 0:
        return str(exitcode)
    try:
        name = signal.Signals(-exitcode).name
    except ValueError:
        return str(exitcode)
    hint = ", often the kernel's out-of-memory killer: try a smaller --nproc" if name == "SIGKILL" else ""
    return f"{exitcode} ({name}{hint})"


def root_cause(output: str) -> str:
    """'rank 1 exitcode -9 (SIGKILL)' from torchrun's root-cause block, or '' when it printed none."""
    block = output[output.rfind("Root Cause"):] if "Root Cause" in output else output
    rank, exitcode = _ROOT_RANK.search(block), _ROOT_EXITCODE.search(block)
    if rank is None or exitcode is None:
        return ""
    return f"rank {rank.group(1)} exitcode {exit_cause(int(exitcode.group(1)))}"


def rank_error(output: str, fallback: bool = True) -> str:
    """The first exception a rank printed (the root cause), not torchrun's own ChildFailedError."""
    for line in output.splitlines():
        line = line.strip()
        if _EXCEPTION_LINE.match(line) and "ChildFailedError" not in line:
            return line
    return "no error line in the ranks' output" if fallback else ""


def single_process_samples_per_s(case: DistributedCase, rows: list[dict[str, Any]]) -> float | None:
    """The one-process baseline for `case` from the rows already written in this run."""
    same = [r["samples_per_s"] for r in rows
            if r.get("workload") == "ddp" and r.get("status") == "ok" and r.get("parallel") == "ddp" and r.get("world_size") == 1
            and r.get("backend") == case.backend and r.get("batch_size") == case.batch_size and r.get("samples_per_s")]
    return median(same) if same else None


def sweep_stale_workdirs(now_s: float | None = None, folder: Path | None = None) -> None:
    """Remove this user's workdirs left by a killed run (older than a day: no running case owns
    them). Another user's are never touched, even by root (the owner's uid is checked, not access);
    a link of that name is not a workdir."""
    now_s = time.time() if now_s is None else now_s
    for stale in (folder or Path(tempfile.gettempdir())).glob(f"{WORKDIR_PREFIX}*"):
        try:
            info = stale.lstat()
        except OSError:
            continue  # gone meanwhile
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and now_s - info.st_mtime > STALE_WORKDIR_S:
            shutil.rmtree(stale, ignore_errors=True)


def ddp_build(case: DistributedCase, ctx: BuildContext) -> Timed:
    device, data = ctx.device, ctx.data
    sweep_stale_workdirs()
    timeout_s, collective_s = LAUNCH_TIMEOUT_S[ctx.profile], COLLECTIVE_TIMEOUT_S[ctx.profile]
    stall_s = HEARTBEAT_STALL_S[ctx.profile]
    max_steps = MAX_STEPS[ctx.profile]
    workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))  # removed by the Timed's cleanup, which the runner calls in a finally
    try:
        command = torchrun_command(case, device, data, max_steps, workdir / "rank0.json", collective_s)  # resolving the dataset may fail
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)  # no Timed yet, so no cleanup would remove it
        raise

    def baseline() -> tuple[float | None, str]:
        """Samples/s of one process: from this run's rows, else measured now (whatever -k selects)."""
        if case.world_size == 1:
            return None, ""
        found = single_process_samples_per_s(case, ctx.run_rows)
        if found:
            return found, "scaling baseline: this run's world_size=1 row"
        single = replace(case, world_size=1)
        single_json = workdir / "single.json"
        report = budgeted_launch(torchrun_command(single, device, data, max_steps, single_json, collective_s), single_json, timeout_s, stall_s,
                                 ctx.share)  # under a run budget it ends with the case's share, as the case's own launch does
        return report["samples"] / report["train_s"], "scaling baseline: one process measured for this case (no world_size=1 row in this run)"

    def figures(stats: SampleStats, report: dict[str, Any]) -> dict[str, Any]:
        samples_per_s = report["samples"] / report["train_s"]
        single, source = (samples_per_s, "") if case.world_size == 1 else baseline()
        efficiency = samples_per_s / (case.world_size * single) if single else None
        notes = ["samples are rank 0's step times; peak memory is rank 0's", source]
        if efficiency is not None and efficiency > MAX_EFFICIENCY:
            notes.append(f"impossible: scaling efficiency {efficiency:.2f} > {MAX_EFFICIENCY} — another job shared the machine during one of the runs")
        return {"dataset": report["dataset"], "samples_per_s": samples_per_s, "samples_per_s_per_rank": samples_per_s / case.world_size,
                "step_s": stats.median_s, "scaling_efficiency": efficiency,
                "effective_batch": case.batch_size * case.world_size, "peak_mem_bytes": report["peak_mem_bytes"],
                "reason": "; ".join(filter(None, notes))}

    return Timed(fn=lambda: budgeted_launch(command, workdir / "rank0.json", timeout_s, stall_s, ctx.share),
                 figures=figures, plan=RoundPlan(0, 1, 1, 0.0),
                 windows=lambda report: report["step_samples_s"], cleanup=lambda: shutil.rmtree(workdir, ignore_errors=True),
                 energy=False, energy_note=DDP_ENERGY_NOTE)


# The timed call is a whole torchrun launch (process start, imports, data, warm-up steps) and
# one GPU's counter would miss the other ranks': its joules would not be the steps'.
DDP_ENERGY_NOTE = "energy: not measured for a DDP launch (mostly process start-up; other ranks' GPUs unread)"


def dataparallel_build(case: DistributedCase, ctx: BuildContext) -> Timed:
    device, profile, data = ctx.device, ctx.profile, ctx.data
    if device.type != "cuda" or torch.cuda.device_count() < 2:
        have = torch.cuda.device_count() if torch.cuda.is_available() else 0
        raise CaseSkipped(f"DataParallel needs two or more GPUs (this machine has {have})")
    global_batch = case.batch_size * case.world_size
    model = torch.nn.DataParallel(make_model("cnn"), device_ids=list(range(case.world_size)))
    trainer = Trainer(model, device, clock=ctx.clock)
    loader = PreloadedLoader(*data.preloaded(True, device), global_batch, shuffle=True)
    steps = MAX_STEPS[profile] or len(loader)

    def run() -> int:
        seen = 0
        for i, batch in enumerate(loader):
            if i >= steps:
                break
            trainer.step([batch])
            seen += batch[1].shape[0]
        return seen

    def figures(stats: SampleStats, seen: int) -> dict[str, Any]:
        samples_per_s = seen / stats.median_s
        return {"dataset": data.dataset, "samples_per_s": samples_per_s, "samples_per_s_per_rank": samples_per_s / case.world_size,
                "step_s": stats.median_s / steps, "effective_batch": global_batch}

    first = next(iter(loader))
    return Timed(fn=run, figures=figures, plan=RoundPlan(1, 1, 1, 0.0), warmup=lambda: trainer.step([first]),
                 energy=False, energy_note="energy: not measured for DataParallel (one GPU's counter of several)")


def build(case: DistributedCase, ctx: BuildContext) -> Timed:
    return (dataparallel_build if case.parallel == "dataparallel" else ddp_build)(case, ctx)


def headline(cases: list[DistributedCase]) -> list[DistributedCase]:
    """DDP at one process and at every process: the summary's scaling row."""
    return [c for c in cases if c.parallel == "ddp"]


def work(case: DistributedCase, ctx: BuildContext) -> Work:
    """One torchrun launch: its start (the launcher, then the ranks importing torch) and the steps; on
    a CPU the ranks share its cores, so their steps add up."""
    steps = MAX_STEPS[str(ctx.profile)] or 60_000 // case.batch_size
    ranks_sharing = case.world_size if ctx.device.type == "cpu" else 1
    return Work(flops=steps * case.batch_size * CNN_TRAIN_FLOPS * ranks_sharing, efficiency=CNN_EFFICIENCY,
                launches=steps * CNN_STEP_LAUNCHES, processes=2 if case.parallel == "ddp" else 0, calls=1)


WORKLOAD = Workload(SPEC, cases, build, headline, work)
