"""A torchrun launch of a multi-process case: its time limits, heartbeats that name a stopped rank,
the failure read from the ranks' output, and the workdirs a killed run left behind; and what every
rank worker shares: its options, its life in the process group and rank 0's report."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import signal
import stat
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NoReturn

import torch
import torch.distributed as dist

from gpubench import IMPORT_ROOT
from gpubench.harness.budget.shares import MIN_SHARE_S, CaseShare, OverBudget
from gpubench.harness.core.duration_text import format_duration
from gpubench.harness.devices.cpu_limits import usable_cores
from gpubench.harness.measurement.cases import Case
from gpubench.harness.processes.launch import STOPPED_LIMIT_S, Job
from gpubench.harness.records.safe_files import replace_bytes
from gpubench.harness.processes.torchrun import TorchrunLauncher
from gpubench.harness.core.console import CONSOLE


# A whole torchrun launch per profile: past it a rank hung or died unnoticed, and the launch is
# killed.
LAUNCH_TIMEOUT_S = {"smoke": 120, "quick": 600, "full": 3600}
# The ranks' collective timeout: a silent peer fails the waiting rank with an error (quoted in the
# reason) before the launch is killed without one; at most two minutes below full, so a quick case
# ends within 5 min.
COLLECTIVE_TIMEOUT_S = {"smoke": 60, "quick": 120, "full": 1800}
# A rank whose heartbeat file is this old stopped responding (SIGSTOP, frozen): the launch is killed
# naming it. the launcher's limit for a stopped build: one table
HEARTBEAT_STALL_S = STOPPED_LIMIT_S
# After a failed launch: a rank whose last heartbeat came this long before the last rank's went
# silent first.
SILENT_BEFORE_OTHERS_S = 5.0
WORKDIR_PREFIX = "gpubench-ddp-"
# no running case owns a workdir this old (a launch lasts at most an hour)
STALE_WORKDIR_S = 24 * 3600


def torchrun_command(
    worker: str, world_size: int, result_json: Path, timeout_s: float, *options: str
) -> list[str]:
    """torchrun on this node (--standalone), rank 0 reporting to `result_json`; every rank beats
    beside it."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={world_size}",
        "-m",
        worker,
        *options,
        f"--result-json={result_json}",
        f"--timeout-s={timeout_s:g}",
        f"--heartbeat-dir={heartbeat_dir(result_json)}",
    ]


def heartbeat_dir(result_json: Path) -> Path:
    """One folder per launch (the baseline launch shares the case's workdir)."""
    return result_json.with_name(f"{result_json.stem}-heartbeats")


def last_beat_s(folder: Path) -> float | None:
    """When the last rank still beating last beat: the moment the launch ended."""
    return max((float(beat["time_s"]) for beat in read_heartbeats(folder).values()), default=None)


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
    """'rank 1 stopped responding (no heartbeat for 31 s, at step 1)' for the oldest heartbeat past
    `stall_s`."""
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


def budgeted_launch(
    command: list[str], result_json: Path, timeout_s: float, stall_s: float, share: CaseShare | None
) -> dict[str, Any]:
    """A launch stopped at its case's budget share: a skipped row that keeps the seconds it ran (so
    the next run under the same budget does not start it)."""
    limit_s = timeout_s if share is None else min(timeout_s, max(share.left_s(), MIN_SHARE_S))
    started_s = time.monotonic()
    try:
        return launch(command, result_json, limit_s, stall_s)
    except LaunchTimedOut:
        if share is None or limit_s >= timeout_s:
            raise
        ran_s = time.monotonic() - started_s
        share_s, budget_s = format_duration(share.share_s), format_duration(share.budget_s)
        raise OverBudget(
            f"over budget: the launch ran {format_duration(ran_s)} and was stopped at its "
            f"{share_s} share of the {budget_s} budget — raise --budget or deselect it",
            ran_s,
        ) from None


def launch(
    command: list[str],
    result_json: Path,
    timeout_s: float = LAUNCH_TIMEOUT_S["full"],
    stall_s: float = HEARTBEAT_STALL_S["full"],
) -> dict[str, Any]:
    """Run torchrun and read rank 0's report. A rank `stall_s` stale ends the launch, named; a
    failing rank fails the case with its exit cause and first error line; a launch past `timeout_s`
    is killed with all its ranks."""
    # TMPDIR: torchrun's scratch (torchelastic_* logs) goes into the case's workdir, removed with
    # it, not /tmp.
    env = dict(
        os.environ,
        TMPDIR=str(result_json.parent),
        PYTHONPATH=os.pathsep.join(filter(None, [str(IMPORT_ROOT), os.environ.get("PYTHONPATH")])),
    )
    beats = heartbeat_dir(result_json)
    done = TorchrunLauncher().run(
        Job(command, env, timeout_s, watch=lambda: silent_rank(beats, stall_s))
    )
    output = done.stderr + done.stdout
    if done.stalled:
        raise RuntimeError(
            f"{done.stalled}: the launch was killed with its ranks (the others waited for it) — "
            "a stopped (SIGSTOP), swapped-out or frozen process; rerun the case"
        )
    if done.timed_out:
        first = rank_error(output, fallback=False)
        detail = f" (first error: {first})" if first else ""
        raise LaunchTimedOut(
            f"torchrun timed out after {timeout_s:g} s and was killed with its ranks: a rank hung "
            f"or died unnoticed{detail} — rerun the case; if it hangs again, run ddp_worker under "
            "torchrun by hand (docs/usage.md, Multi-process training) to watch the ranks"
        )
    # a silent rank (named first) makes a peer time out waiting
    if done.code != 0 or not result_json.exists():
        cause = root_cause(output)
        silent = silent_rank(beats, SILENT_BEFORE_OTHERS_S, now_s=last_beat_s(beats))
        raise RuntimeError(
            f"torchrun exited {done.code}: "
            + "; ".join(filter(None, [silent, cause, rank_error(output, fallback=not cause)]))
        )
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
    hint = (
        ", often the kernel's out-of-memory killer: try a smaller --nproc"
        if name == "SIGKILL"
        else ""
    )
    return f"{exitcode} ({name}{hint})"


def root_cause(output: str) -> str:
    """'rank 1 exitcode -9 (SIGKILL)' from torchrun's root-cause block, or '' when it printed
    none."""
    block = output[output.rfind("Root Cause") :] if "Root Cause" in output else output
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


def sweep_stale_workdirs(now_s: float | None = None, folder: Path | None = None) -> None:
    """Remove this user's workdirs older than a day; another user's are never touched, even by root
    (the uid is checked, not access), and a link of that name is not a workdir."""
    now_s = time.time() if now_s is None else now_s
    for stale in (folder or Path(tempfile.gettempdir())).glob(f"{WORKDIR_PREFIX}*"):
        try:
            info = stale.lstat()
        except OSError:
            # gone meanwhile
            continue
        if (
            stat.S_ISDIR(info.st_mode)
            and info.st_uid == os.getuid()
            and now_s - info.st_mtime > STALE_WORKDIR_S
        ):
            shutil.rmtree(stale, ignore_errors=True)


HEARTBEAT_PERIOD_S = 1.0


class Heartbeat:
    """A daemon thread rewriting heartbeat-<rank>.json every second: a rank waiting in a collective
    still beats, so a stale file marks the rank that stopped (every thread frozen), not the
    waiter."""

    def __init__(self, folder: Path, rank: int) -> None:
        # -1: not training yet
        self.path, self.rank, self.step = folder / f"heartbeat-{rank}.json", rank, -1

    def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        threading.Thread(target=self._beat, name="gpubench-heartbeat", daemon=True).start()

    def _beat(self) -> None:
        partial = self.path.with_name(self.path.name + ".tmp")
        while True:
            try:
                partial.write_text(
                    json.dumps({"rank": self.rank, "step": self.step, "time_s": time.time()})
                )
                # whole or absent for the reader
                os.replace(partial, self.path)
            # the workdir removed under a rank being torn down
            except OSError:
                return
            time.sleep(HEARTBEAT_PERIOD_S)


def exit_rank(main: Callable[[], int]) -> NoReturn:
    """Run a rank's main and leave without the interpreter's finalization, where gloo's threads can
    abort (SIGABRT, "terminate called without an active exception") and torchrun would report a
    failed rank, or a rank that failed with an exception as killed by a signal."""
    try:
        code = main()
    # a failed collective: printed as Python would, then the same early exit
    except Exception:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def rank_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of every rank worker: its device, where rank 0 reports, the peers' timeout, the
    heartbeats."""
    parser.add_argument(
        "--device-type",
        choices=("cpu", "cuda"),
        default="cuda" if torch.cuda.is_available() else "cpu",
    )
    parser.add_argument("--result-json", default=None, help="rank 0 writes its report here")
    parser.add_argument("--results-dir", default=None, help="rank 0 appends its results rows here")
    parser.add_argument(
        "--timeout-s",
        type=float,
        default=1800.0,
        help="seconds a collective waits for the other ranks before this rank fails "
        "(a dead or hung peer)",
    )
    parser.add_argument(
        "--heartbeat-dir",
        default=None,
        help="each rank rewrites heartbeat-<rank>.json here every second, with its step",
    )
    return parser


RankWork = Callable[[int, torch.device, int, Heartbeat | None], None]


def run_rank(args: argparse.Namespace, work: RankWork) -> int:
    """One rank's life: its device and threads, its heartbeat, `work(rank, device, world_size,
    beat)` inside the process group (joined with the peers' timeout), then the group left
    together."""
    rank, local_rank, world_size = (
        int(os.environ[name]) for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE")
    )
    device = torch.device("cpu")
    if args.device_type == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    # the ranks share the cores
    else:
        torch.set_num_threads(
            max(1, usable_cores() // int(os.environ.get("LOCAL_WORLD_SIZE", world_size)))
        )
    beat = Heartbeat(Path(args.heartbeat_dir), rank) if args.heartbeat_dir else None
    if beat is not None:
        beat.start()
    dist.init_process_group(
        backend="nccl" if device.type == "cuda" else "gloo",
        timeout=datetime.timedelta(seconds=args.timeout_s),
    )
    try:
        work(rank, device, world_size, beat)
        # tear down together: a rank leaving early can abort the others' gloo context
        barrier(device)
    finally:
        dist.destroy_process_group()
    return 0


def barrier(device: torch.device) -> None:
    dist.barrier(device_ids=[device.index]) if device.type == "cuda" else dist.barrier()


def report_rank0(
    args: argparse.Namespace,
    report: dict[str, Any],
    device: torch.device,
    rows: Callable[[], Iterable[tuple[Case, Any]]],
) -> None:
    """Rank 0's report: JSON to --result-json (how the suite reads it), `rows` (case, CaseResult) to
    --results-dir."""
    if args.result_json:
        # whole or absent, never written through a link planted there
        result = Path(args.result_json)
        replace_bytes(
            result.parent,
            result.name,
            json.dumps(report).encode("utf-8"),
            "--result-json folder",
            "pass a real folder",
        )
    if args.results_dir:
        CONSOLE.show(f"rank 0: rows -> {write_rows(rows(), Path(args.results_dir), device)}")


def write_rows(rows: Iterable[tuple[Case, Any]], results_dir: Path, device: torch.device) -> Path:
    """Standalone use: rank 0 writes its rows through a RunRecords (this node's fingerprint and
    sidecar), with the suite's case ids."""
    from gpubench.harness.measurement.runner import standalone_row
    from gpubench.harness.measurement.run_records import RunRecords
    from gpubench.harness.records.results import check_writable, new_run_id

    check_writable(results_dir)
    records = RunRecords(device, results_dir, new_run_id(), "torchrun")
    records.open()
    for case, result in rows:
        records.record(standalone_row(records.base_row(), case, result))
    records.close()
    return records.csv_path
