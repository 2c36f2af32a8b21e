"""Multi-device training (guide §6): DDP under torchrun against one process, and DataParallel."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import torch

from harness.cases import Case, CaseSkipped
from harness.lifetime import child_preexec
from harness.runner import BuildContext, Timed
from harness.stats import SampleStats, median
from harness.timing import RoundPlan
from harness.workloads.data_source import DataSource, PreloadedLoader
from harness.workloads.models import make_model
from harness.workloads.train_loop import Trainer

# Per-rank steps per profile (0 = the full epoch of the rank's shard).
MAX_STEPS = {"smoke": 5, "quick": 40, "full": 0}
PER_RANK_BATCH = 128
MAX_EFFICIENCY = 1.05  # above this, N processes beat N x one process: the measurement is wrong
# A whole torchrun launch (start, warm-up, the steps, teardown) per profile: past it a rank hung
# or died without torchrun noticing, and the launch is killed with every rank.
LAUNCH_TIMEOUT_S = {"smoke": 120, "quick": 600, "full": 3600}
# The ranks' own collective timeout is half the launch's: a peer that stopped answering fails the
# rank with its error (quoted in the case's reason) before the launch is killed without one.
COLLECTIVE_SHARE = 0.5
MAX_PROCS_PER_CORE = 4  # gloo ranks beyond this share the cores so thinly that the case measures the scheduler
RANK_HOST_BYTES = 1_500_000_000  # host memory one CPU rank needs: torch, the CNN, the preloaded dataset
WORKDIR_PREFIX = "gpubench-ddp-"
KILL_GRACE_S = 30  # after SIGKILL, how long to wait for the killed launch's output
STALE_WORKDIR_S = 24 * 3600  # a workdir this old belongs to no running case (a launch lasts at most an hour)
MARKERS = ("slow", "training", "distributed")
BUILDS = {"smoke": 1, "quick": 1, "full": 1}  # a launch is seconds of process start; steps give the spread


class NprocError(ValueError):
    pass


@dataclass(frozen=True)
class DistributedCase(Case):
    workload: ClassVar[str] = "ddp"
    parallel: str  # ddp | dataparallel
    world_size: int
    backend: str
    batch_size: int  # per rank (ddp) or per GPU share of the global batch (dataparallel)


def available_memory_bytes() -> int:
    import psutil

    return int(psutil.virtual_memory().available)


def default_nproc(device: torch.device) -> int:
    """The GPU count on cuda; 2 CPU ranks, or 1 where the memory holds only one (the default must
    never be refused by check_nproc)."""
    if device.type == "cuda":
        return torch.cuda.device_count()
    return 2 if 2 * RANK_HOST_BYTES <= available_memory_bytes() else 1


def check_cpu_nproc(nproc: int) -> None:
    """CPU ranks the machine cannot hold: too many per core, or more than its free memory."""
    cores = os.cpu_count() or 1
    if nproc > MAX_PROCS_PER_CORE * cores:
        raise NprocError(f"--nproc {nproc} is more than {MAX_PROCS_PER_CORE} processes per core on this {cores}-core machine — use --nproc {MAX_PROCS_PER_CORE * cores} or fewer")
    available = available_memory_bytes()
    if nproc > 1 and nproc * RANK_HOST_BYTES > available:
        fits = max(1, available // RANK_HOST_BYTES)
        raise NprocError(f"--nproc {nproc} needs about {nproc * RANK_HOST_BYTES / 1e9:.1f} GB ({RANK_HOST_BYTES / 1e9:.1f} GB per process) "
                         f"but {available / 1e9:.1f} GB is available — use --nproc {fits} or fewer")


def check_nproc(nproc: int, device: torch.device) -> int:
    """Processes the machine cannot hold are refused before launch: more than the GPUs on cuda
    (each rank owns one), more than the cores or the memory can hold on cpu."""
    if nproc < 1:
        raise NprocError(f"--nproc {nproc}: use a positive number of processes")
    if device.type == "cpu":
        check_cpu_nproc(nproc)
    if device.type == "cuda" and nproc > torch.cuda.device_count():
        raise NprocError(f"--nproc {nproc} needs {nproc} GPUs but this machine has {torch.cuda.device_count()} — use --nproc {torch.cuda.device_count()} or fewer")
    if device.type == "mps" and nproc > 1:
        raise NprocError("DDP on mps is not supported by PyTorch — use --device cpu for gloo processes")
    return nproc


def cases(ctx: BuildContext) -> list[DistributedCase]:
    nproc, device = ctx.nproc, ctx.device
    backend = "nccl" if device.type == "cuda" else "gloo"
    ddp = [DistributedCase("ddp", n, backend, PER_RANK_BATCH) for n in sorted({1, nproc})]
    dataparallel = [DistributedCase("dataparallel", max(nproc, 2), "single-process", PER_RANK_BATCH)]
    return ddp + dataparallel


def torchrun_command(case: DistributedCase, device: torch.device, data: DataSource, max_steps: int, result_json: Path,
                     timeout_s: float = LAUNCH_TIMEOUT_S["full"]) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={case.world_size}",
            "-m", "harness.workloads.ddp_worker", f"--batch-size={case.batch_size}", f"--max-steps={max_steps}",
            f"--device-type={'cuda' if device.type == 'cuda' else 'cpu'}", f"--dataset={data.dataset}",
            f"--data-root={data.root}", f"--result-json={result_json}", f"--timeout-s={timeout_s * COLLECTIVE_SHARE:g}"]


def kill_launch(proc: subprocess.Popen[str]) -> None:
    """SIGKILL torchrun and every rank. torchrun starts each rank in a session of its own, so
    killing torchrun's process group alone would orphan them: the ranks are found (while torchrun
    still holds them) and killed one by one, then torchrun's group."""
    import psutil

    try:
        ranks = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        ranks = []
    for rank in ranks:
        try:
            rank.kill()
        except psutil.Error:
            continue  # already gone
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the group start_new_session gave torchrun (not ours)
    except (ProcessLookupError, PermissionError):
        pass


def launch(command: list[str], result_json: Path, timeout_s: float = LAUNCH_TIMEOUT_S["full"]) -> dict[str, Any]:
    """Run torchrun and read rank 0's report. A failing rank fails the case naming the rank, its
    exit cause and its first error line; a launch past `timeout_s` is killed with all its ranks."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH")])))
    # A session of its own: the whole launch can be killed without touching this process.
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True,
                            preexec_fn=child_preexec())  # and it dies with this process (torchrun then stops its ranks)
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_launch(proc)
        try:
            stdout, stderr = proc.communicate(timeout=KILL_GRACE_S)
        except subprocess.TimeoutExpired:  # something outside the tree still holds the pipes: do not wait on it
            stdout, stderr = "", ""
        first = rank_error(stderr + stdout, fallback=False)
        detail = f" (first error: {first})" if first else ""
        raise RuntimeError(f"torchrun timed out after {timeout_s:g} s and was killed with its ranks: a rank hung or died unnoticed{detail} — "
                           "rerun the case; if it hangs again, run ddp_worker under torchrun by hand (README, Multi-process training) to watch the ranks") from None
    finally:
        if proc.poll() is None:  # interrupted (Ctrl-C no longer reaches a separate session): take the ranks down too
            kill_launch(proc)
            proc.wait()
    if proc.returncode != 0 or not result_json.exists():
        output = stderr + stdout
        cause = root_cause(output)
        raise RuntimeError(f"torchrun exited {proc.returncode}: " + "; ".join(filter(None, [cause, rank_error(output, fallback=not cause)])))
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
    """Remove workdirs left by a killed run (older than a day: no running case owns them)."""
    now_s = time.time() if now_s is None else now_s
    for stale in (folder or Path(tempfile.gettempdir())).glob(f"{WORKDIR_PREFIX}*"):
        try:
            if stale.is_dir() and now_s - stale.stat().st_mtime > STALE_WORKDIR_S:
                shutil.rmtree(stale, ignore_errors=True)
        except OSError:
            continue  # another user's, or gone meanwhile


def ddp_build(case: DistributedCase, ctx: BuildContext) -> Timed:
    device, data = ctx.device, ctx.data
    sweep_stale_workdirs()
    timeout_s = LAUNCH_TIMEOUT_S[ctx.profile]
    max_steps = MAX_STEPS[ctx.profile]
    workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX))  # removed by the Timed's cleanup, which the runner calls in a finally
    try:
        command = torchrun_command(case, device, data, max_steps, workdir / "rank0.json", timeout_s)  # resolving the dataset may fail
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
        report = launch(torchrun_command(single, device, data, max_steps, single_json, timeout_s), single_json, timeout_s)
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

    return Timed(fn=lambda: launch(command, workdir / "rank0.json", timeout_s), figures=figures, plan=RoundPlan(0, 1, 1, 0.0),
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
    trainer = Trainer(model, device)
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
