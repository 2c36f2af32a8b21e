"""One rank of the collectives benchmark, launched by torchrun: by the suite (through the DDP workload's launcher),
or by hand on one node or many:

    torchrun --nproc_per_node=8 -m gpubench.harness.workloads.collectives_worker --results-dir results
    torchrun --nnodes=2 --node_rank=0 --nproc_per_node=8 --rdzv_backend=c10d \\
             --rdzv_endpoint=HOST0:29500 -m gpubench.harness.workloads.collectives_worker --results-dir results

Every rank times every size of every collective in lockstep (backend nccl on CUDA, gloo on CPU):
warm-up, then rounds that start together at a barrier; a round's time is the slowest rank's. After
the rounds, one call on fresh inputs is checked element by element on every rank. Rank 0 alone
reports: to --result-json (how the suite reads it) or as results rows in --results-dir.

A collective that waits longer than --timeout-s for a peer fails the rank instead of hanging it;
with --heartbeat-dir each rank beats there (gpubench.harness.workloads.common.torchrun_launch.Heartbeat).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from gpubench.harness.catalog.collectives import OPS, elements
from gpubench.harness.devices.cpu_limits import usable_cores
from gpubench.harness.devices.device import empty_cache
from gpubench.harness.core.plan import BuildTiming, RoundPlan, plan_rounds
from gpubench.harness.catalog.profiles import Profile
from gpubench.harness.records.safe_files import replace_bytes
from gpubench.harness.measurement.loop import time_call, warm_up
from gpubench.harness.measurement.timing import SyncedClock
from gpubench.harness.workloads.common.collective_ops import COLLECTIVES, Collective, Ranks, gather_single, mismatch
from gpubench.harness.workloads.common.torchrun_launch import Heartbeat, exit_rank


def _int_list(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from gpubench.harness.workloads.collectives import ladder  # so a run by hand times the suite's sizes

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device-type", choices=("cpu", "cuda"),
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--profile", choices=[p.value for p in Profile], default="quick",
                        help="timed seconds per size, and the default sizes")
    parser.add_argument("--ops", default=",".join(OPS), help=f"comma-separated, of {', '.join(OPS)}")
    parser.add_argument("--sizes", type=_int_list, default=None,
                        help="comma-separated bytes (default: the profile's ladder)")
    parser.add_argument("--result-json", default=None, help="rank 0 writes its report here")
    parser.add_argument("--results-dir", default=None,
                        help="rank 0 appends a results row per collective and size here")
    parser.add_argument("--timeout-s", type=float, default=1800.0,
                        help="seconds a collective waits for the other ranks before this rank fails")
    parser.add_argument("--heartbeat-dir", default=None,
                        help="each rank rewrites heartbeat-<rank>.json here every second")
    args = parser.parse_args(argv)
    args.ops = [op for op in args.ops.split(",") if op]
    if unknown := [op for op in args.ops if op not in OPS]:
        parser.error(f"unknown collective(s) {', '.join(unknown)}: use {', '.join(OPS)}")
    args.sizes = args.sizes or list(ladder(args.profile, args.device_type))
    return args


@dataclass(frozen=True)
class Group:
    """What a rank needs to act in lockstep with the others."""

    ranks: Ranks
    device: torch.device
    clock: SyncedClock

    def barrier(self) -> None:
        dist.barrier(device_ids=[self.device.index]) if self.device.type == "cuda" else dist.barrier()

    def slowest(self, values: list[float]) -> list[float]:
        """Each value's maximum over the ranks (the same list on every rank)."""
        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return tensor.tolist()

    def gathered(self, values: list[float]) -> list[list[float]]:
        """Every rank's values, by rank."""
        mine = torch.tensor(values, dtype=torch.float64, device=self.device)
        out = torch.empty(len(values) * self.ranks.world_size, dtype=torch.float64, device=self.device)
        gather_single(out, mine)
        return out.view(self.ranks.world_size, -1).tolist()


def timed_round(call: Callable[[], None], iterations: int, group: Group) -> float:
    """Seconds per call on this rank, the ranks started together."""
    group.barrier()
    return time_call(call, group.clock, iterations)


def time_rounds(call: Callable[[], None], timing: BuildTiming, group: Group) -> tuple[RoundPlan, list[float]]:
    """Warm-up, calibration and rounds as measure plans them, every rank planning from the slowest rank's estimate so
    all make the same calls. Returns the plan and each round's time per call on the slowest rank."""
    estimate_s = group.slowest([warm_up(call, timing.warmup_calls, group.clock)])[0]
    plan = plan_rounds(estimate_s, timing)
    if plan.iterations > 1:  # calibrate on one whole round (still warm-up): a round must really last min_round_s
        plan = plan_rounds(group.slowest([timed_round(call, plan.iterations, group)])[0], timing)
    samples_s = [timed_round(call, plan.iterations, group) for _ in range(plan.rounds)]
    return plan, group.slowest(samples_s)


def check(collective: Collective, count: int, group: Group) -> list[list[float]]:
    """One call on fresh inputs checked element by element: every rank's (wrong, first index, value, expected)."""
    buffers = collective.make(count, group.ranks, group.device)
    collective.call(buffers, group.ranks)
    group.clock()  # the result is complete before it is read
    expected = collective.expected(count, group.ranks, group.device)
    return group.gathered(list(mismatch(buffers.result, expected)))


def measure_point(collective: Collective, size_bytes: int, timing: BuildTiming, group: Group) -> dict[str, Any]:
    """One collective at one size: the slowest rank's seconds per call per round, then the check."""
    count = elements(collective.name, size_bytes, group.ranks.world_size)
    buffers = collective.make(count, group.ranks, group.device)
    if collective.in_place_sum:
        buffers.result.zero_()
    plan, samples_s = time_rounds(partial(collective.call, buffers, group.ranks), timing, group)
    del buffers  # freed before the check allocates its own
    per_rank = check(collective, count, group)
    empty_cache(group.device, collect=False)
    mismatches = [[rank, *map(float, found)] for rank, found in enumerate(per_rank) if found[0] > 0]
    return {"op": collective.name, "size": size_bytes, "iterations": plan.iterations,
            "samples_s": samples_s, "wrong": int(sum(found[0] for found in per_rank)), "mismatches": mismatches}


def run_ladder(args: argparse.Namespace, group: Group, collectives: Mapping[str, Collective],
               beat: Heartbeat | None) -> dict[str, Any]:
    """Every size of every collective; a size below one element per chunk is left out (the suite skips it)."""
    timing = Profile(args.profile).timing
    points = []
    for op in args.ops:
        for size in args.sizes:
            if elements(op, size, group.ranks.world_size) == 0:
                continue
            points.append(measure_point(collectives[op], size, timing, group))
            if beat is not None:
                beat.step = len(points)
    return {"world_size": group.ranks.world_size, "backend": dist.get_backend(), "points": points}


def write_rows(report: dict[str, Any], results_dir: Path, device: torch.device) -> Path:
    """Standalone use: rank 0 writes a row per collective and size through a Session, with the suite's case ids."""
    from gpubench.harness.measurement.runner import standalone_row
    from gpubench.harness.measurement.session import Session
    from gpubench.harness.records.results import check_writable, new_run_id
    from gpubench.harness.workloads.collectives import CollectiveCase, point_result

    check_writable(results_dir)
    session = Session(device, results_dir, new_run_id(), "torchrun")
    session.open()
    for point in report["points"]:
        case = CollectiveCase(point["op"], "fp32", point["size"], report["world_size"], report["backend"])
        session.record(standalone_row(session.base_row(), case, point_result(case, point)))
    session.close()
    return session.csv_path


def rank_device(device_type: str, local_rank: int) -> torch.device:
    if device_type != "cuda":
        return torch.device("cpu")
    torch.cuda.set_device(local_rank)
    return torch.device("cuda", local_rank)


def report_results(args: argparse.Namespace, report: dict[str, Any], device: torch.device) -> None:
    if args.result_json:
        result = Path(args.result_json)  # whole or absent, never written through a link planted there
        replace_bytes(result.parent, result.name, json.dumps(report).encode("utf-8"), "--result-json folder",
                      "pass a real folder")
    if args.results_dir:
        print(f"rank 0: rows -> {write_rows(report, Path(args.results_dir), device)}")


def main(argv: list[str] | None = None, collectives: Mapping[str, Collective] = COLLECTIVES) -> int:
    """`collectives`: the calls to time and check (a test passes a broken one to see it caught)."""
    args = parse_args(argv)
    rank, local_rank, world_size = (int(os.environ[name]) for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE"))
    if args.device_type == "cpu":  # gloo's copies and sums share the cores with the other ranks
        torch.set_num_threads(max(1, usable_cores() // int(os.environ.get("LOCAL_WORLD_SIZE", world_size))))
    device = rank_device(args.device_type, local_rank)
    beat = Heartbeat(Path(args.heartbeat_dir), rank) if args.heartbeat_dir else None
    if beat is not None:
        beat.start()
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=args.timeout_s))
    try:
        group = Group(Ranks(rank, world_size), device, SyncedClock(device))
        report = run_ladder(args, group, collectives, beat)
        if rank == 0:
            report_results(args, report, device)
        group.barrier()  # tear down together: a rank leaving early can abort the others' gloo context
    finally:
        dist.destroy_process_group()
    return 0


def run_as_script(collectives: Mapping[str, Collective] = COLLECTIVES) -> None:
    exit_rank(partial(main, collectives=collectives))


if __name__ == "__main__":
    run_as_script()
