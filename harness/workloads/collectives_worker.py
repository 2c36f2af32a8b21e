"""One rank of the collectives benchmark, launched by torchrun: by the suite (through the DDP
workload's launcher), or by hand on one node or many:

    torchrun --nproc_per_node=8 -m gpubench.harness.workloads.collectives_worker \\
             --results-dir results
    torchrun --nnodes=2 --node_rank=0 --nproc_per_node=8 --rdzv_backend=c10d \\
             --rdzv_endpoint=HOST0:29500 -m gpubench.harness.workloads.collectives_worker \\
             --results-dir results

Every rank times every size of every collective in lockstep (backend nccl on CUDA, gloo on CPU):
warm-up, then rounds that start together at a barrier; a round's time is the slowest rank's. After
the rounds, one call on fresh inputs is checked element by element on every rank. Rank 0 alone
reports: to --result-json (how the suite reads it) or as results rows in --results-dir.

A collective that waits longer than --timeout-s for a peer fails the rank instead of hanging it;
with --heartbeat-dir each rank beats there
(gpubench.harness.workloads.common.torchrun_launch.Heartbeat).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
import torch.distributed as dist

from gpubench.harness.catalog.collectives import OPS, elements
from gpubench.harness.devices.device import empty_cache
from gpubench.harness.core.plan import BuildTiming, RoundPlan, plan_rounds
from gpubench.harness.catalog.profiles import Profile
from gpubench.harness.measurement.loop import time_call, warm_up
from gpubench.harness.measurement.timing import SyncedClock
from gpubench.harness.workloads.common.collective_ops import (
    COLLECTIVES,
    Collective,
    Ranks,
    gather_single,
    mismatch,
)
from gpubench.harness.workloads.common.torchrun_launch import (
    Heartbeat,
    barrier,
    exit_rank,
    rank_arguments,
    report_rank0,
    run_rank,
)


def _int_list(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    # so a run by hand times the suite's sizes
    from gpubench.harness.workloads.collectives import ladder

    parser = rank_arguments(
        argparse.ArgumentParser(
            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
        )
    )
    parser.add_argument(
        "--profile",
        choices=[p.value for p in Profile],
        default="quick",
        help="timed seconds per size, and the default sizes",
    )
    parser.add_argument(
        "--ops", default=",".join(OPS), help=f"comma-separated, of {', '.join(OPS)}"
    )
    parser.add_argument(
        "--sizes",
        type=_int_list,
        default=None,
        help="comma-separated bytes (default: the profile's ladder)",
    )
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
        barrier(self.device)

    def slowest(self, values: list[float]) -> list[float]:
        """Each value's maximum over the ranks (the same list on every rank)."""
        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return tensor.tolist()

    def gathered(self, values: list[float]) -> list[list[float]]:
        """Every rank's values, by rank."""
        mine = torch.tensor(values, dtype=torch.float64, device=self.device)
        out = torch.empty(
            len(values) * self.ranks.world_size, dtype=torch.float64, device=self.device
        )
        gather_single(out, mine)
        return out.view(self.ranks.world_size, -1).tolist()


def timed_round(call: Callable[[], None], iterations: int, group: Group) -> float:
    """Seconds per call on this rank, the ranks started together."""
    group.barrier()
    return time_call(call, group.clock, iterations)


def time_rounds(
    call: Callable[[], None], timing: BuildTiming, group: Group
) -> tuple[RoundPlan, list[float]]:
    """Warm-up, calibration and rounds as measure plans them, every rank planning from the slowest
    rank's estimate so all make the same calls. Returns the plan and each round's time per call on
    the slowest rank."""
    estimate_s = group.slowest([warm_up(call, timing.warmup_calls, group.clock)])[0]
    plan = plan_rounds(estimate_s, timing)
    # calibrate on one whole round (still warm-up): a round must really last min_round_s
    if plan.iterations > 1:
        plan = plan_rounds(group.slowest([timed_round(call, plan.iterations, group)])[0], timing)
    samples_s = [timed_round(call, plan.iterations, group) for _ in range(plan.rounds)]
    return plan, group.slowest(samples_s)


def check(collective: Collective, count: int, group: Group) -> list[list[float]]:
    """One call on fresh inputs checked element by element: every rank's (wrong, first index, value,
    expected)."""
    buffers = collective.make(count, group.ranks, group.device)
    collective.call(buffers, group.ranks)
    # the result is complete before it is read
    group.clock()
    expected = collective.expected(count, group.ranks, group.device)
    return group.gathered(list(mismatch(buffers.result, expected)))


def measure_point(
    collective: Collective, size_bytes: int, timing: BuildTiming, group: Group
) -> dict[str, Any]:
    """One collective at one size: the slowest rank's seconds per call per round, then the check."""
    count = elements(collective.name, size_bytes, group.ranks.world_size)
    buffers = collective.make(count, group.ranks, group.device)
    if collective.in_place_sum:
        buffers.result.zero_()
    plan, samples_s = time_rounds(partial(collective.call, buffers, group.ranks), timing, group)
    # freed before the check allocates its own
    del buffers
    per_rank = check(collective, count, group)
    empty_cache(group.device, collect=False)
    mismatches = [[rank, *map(float, found)] for rank, found in enumerate(per_rank) if found[0] > 0]
    return {
        "op": collective.name,
        "size": size_bytes,
        "iterations": plan.iterations,
        "samples_s": samples_s,
        "wrong": int(sum(found[0] for found in per_rank)),
        "mismatches": mismatches,
    }


def run_ladder(
    args: argparse.Namespace,
    group: Group,
    collectives: Mapping[str, Collective],
    beat: Heartbeat | None,
) -> dict[str, Any]:
    """Every size of every collective; a size below one element per chunk is left out (the suite
    skips it)."""
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


def rows(report: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    """Standalone use: a row per collective and size, with the suite's case ids."""
    from gpubench.harness.workloads.collectives import CollectiveCase, point_result

    for point in report["points"]:
        case = CollectiveCase(
            point["op"], "fp32", point["size"], report["world_size"], report["backend"]
        )
        yield case, point_result(case, point)


def main(argv: list[str] | None = None, collectives: Mapping[str, Collective] = COLLECTIVES) -> int:
    """`collectives`: the calls to time and check (a test passes a broken one to see it caught)."""
    args = parse_args(argv)

    def work(rank: int, device: torch.device, world_size: int, beat: Heartbeat | None) -> None:
        report = run_ladder(
            args, Group(Ranks(rank, world_size), device, SyncedClock(device)), collectives, beat
        )
        if rank == 0:
            report_rank0(args, report, device, lambda: rows(report))

    return run_rank(args, work)


def run_as_script(collectives: Mapping[str, Collective] = COLLECTIVES) -> None:
    exit_rank(partial(main, collectives=collectives))


if __name__ == "__main__":
    run_as_script()
