"""collectives: nccl-tests' figures, the result check, one launch per ladder, and a corrupted
reduction caught as a failed row."""

from __future__ import annotations

import csv
import os
import subprocess
from dataclasses import replace
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import torch
import torch.distributed as dist
from fakes import SteppingClock

from runs import GPUBENCH, summary_as_quick
from gpubench.harness.catalog import spec_for
from gpubench.harness.catalog.collectives import algbw_gbps, bus_factor, elements
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.core.plan import plan_rounds
from gpubench.harness.catalog.profiles import Profile
from gpubench.harness.records.results_reader import read_rows
from gpubench.harness.measurement.runner import run_case
from gpubench.harness.measurement.timing import SyncedClock
from gpubench.harness.measurement.workload import Workload
from gpubench.harness.workloads import collectives, collectives_worker
from gpubench.harness.workloads.common import torchrun_launch
from gpubench.harness.workloads.common.collective_ops import COLLECTIVES, Buffers, Ranks, mismatch
from gpubench.harness.workloads.collectives import MEMORY_PER_SIZE, CollectiveCase, WrongResult
from gpubench.reports.render.summary import declared_summary

ROOT = Path(__file__).resolve().parent.parent
CPU = torch.device("cpu")


def ctx(device: str = "cpu", profile: str = "smoke", nproc: int = 2) -> BuildContext:
    return BuildContext(torch.device(device), Profile(profile), SyncedClock(CPU), nproc)


# ---- nccl-tests' arithmetic, by hand -----------------------------------------------------------


def test_bus_factors_are_nccl_tests() -> None:
    # 2(n-1)/n
    assert bus_factor("all_reduce", 2) == 1.0 and bus_factor("all_reduce", 8) == 1.75
    # (n-1)/n
    assert bus_factor("all_gather", 4) == 0.75 and bus_factor("reduce_scatter", 8) == 0.875
    assert bus_factor("all_to_all", 2) == 0.5
    assert bus_factor("broadcast", 8) == 1.0 and bus_factor("sendrecv", 2) == 1.0
    # one rank moves nothing over a link
    assert bus_factor("all_reduce", 1) == 0.0
    with pytest.raises(ValueError, match="unknown collective 'allreduce'"):
        bus_factor("allreduce", 2)
    with pytest.raises(ValueError, match="at least 1"):
        bus_factor("broadcast", 0)


def busbw_gbps(op: str, size_bytes: int, seconds: float, world_size: int) -> float:
    """busbw as point_figures derives it from algbw."""
    return algbw_gbps(size_bytes, seconds) * bus_factor(op, world_size)


def test_algbw_and_busbw_arithmetic() -> None:
    # 1 GiB in half a second
    assert algbw_gbps(2**30, 0.5) == pytest.approx(2.147483648)
    # 4 GB/s x 2*3/4
    assert busbw_gbps("all_reduce", 10**9, 0.25, 4) == pytest.approx(6.0)
    # 3 GB/s x 2/3
    assert busbw_gbps("all_gather", 3 * 10**9, 1.0, 3) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="cannot take 0"):
        algbw_gbps(1024, 0.0)


def test_elements_round_chunked_ops_down_to_a_multiple_of_the_ranks() -> None:
    assert elements("all_reduce", 1024, 3) == 256 and elements("broadcast", 1022, 3) == 255
    assert elements("all_gather", 1024, 3) == 255 and elements("all_to_all", 1024, 3) == 255
    # one element cannot be cut in two chunks
    assert elements("reduce_scatter", 4, 2) == 0


# ---- the result each rank must hold --------------------------------------------------------------


def simulated(op: str, sources: list[torch.Tensor], rank: int) -> torch.Tensor:
    """What the collective means, computed from every rank's input without torch.distributed."""
    n = len(sources)
    if op == "all_reduce":
        return torch.stack(sources).sum(0)
    if op == "all_gather":
        return torch.cat(sources)
    if op == "reduce_scatter":
        return torch.stack(sources).sum(0).chunk(n)[rank]
    if op == "broadcast":
        return sources[0]
    if op == "all_to_all":
        return torch.cat([source.chunk(n)[rank] for source in sources])
    # sendrecv: from the previous rank
    return sources[(rank - 1) % n]


@pytest.mark.parametrize("op", list(COLLECTIVES))
def test_expected_result_is_what_the_collective_means(op: str) -> None:
    collective, n = COLLECTIVES[op], 3
    count = elements(op, 60, n)
    sources = [collective.make(count, Ranks(rank, n), CPU).source.clone() for rank in range(n)]
    # the ranks' inputs differ: a chunk from the wrong rank shows
    assert len({tuple(s.tolist()) for s in sources}) == n
    for rank in range(n):
        assert torch.equal(
            collective.expected(count, Ranks(rank, n), CPU), simulated(op, sources, rank)
        )


def test_mismatch_counts_wrong_elements_and_names_the_first() -> None:
    expected = torch.tensor([3.0, 4.0, 5.0, 6.0])
    assert mismatch(torch.tensor([3.0, 4.0, 9.0, 7.0]), expected) == (2, 2, 9.0, 5.0)
    assert mismatch(expected.clone(), expected) == (0, -1, 0.0, 0.0)
    assert mismatch(torch.tensor([3.0, float("nan"), 5.0, 6.0]), expected)[:2] == (1, 1)


def adds_a_wrong_tensor(buffers: Buffers, ranks: Ranks) -> None:
    """A rank that adds ones to its contribution before the sum."""
    buffers.result.add_(torch.ones_like(buffers.result))
    dist.all_reduce(buffers.result)


@pytest.fixture
def one_rank_group():
    """A gloo group of this process alone: the worker's timing and check run in-process."""
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield collectives_worker.Group(Ranks(0, 1), CPU, SyncedClock(CPU))
    finally:
        dist.destroy_process_group()


def test_a_corrupted_reduction_is_counted_and_its_row_fails(one_rank_group) -> None:
    budget = Profile.SMOKE.timing
    right = collectives_worker.measure_point(
        COLLECTIVES["all_reduce"], 1024, budget, one_rank_group
    )
    assert right["wrong"] == 0 and right["mismatches"] == []
    assert budget.min_rounds <= len(right["samples_s"]) <= budget.max_rounds
    broken = replace(COLLECTIVES["all_reduce"], call=adds_a_wrong_tensor)
    point = collectives_worker.measure_point(broken, 1024, budget, one_rank_group)
    # element 0 of rank 0: 1 + 1
    assert point["wrong"] == 256 and point["mismatches"] == [[0.0, 256.0, 0.0, 2.0, 1.0]]
    columns = collectives.point_result(
        CollectiveCase("all_reduce", "fp32", 1024, 1, "gloo"), point
    ).columns()
    assert columns["status"] == "failed" and columns["wrong_elements"] == 256
    assert columns["reason"].startswith(
        "wrong result: 256 elements wrong (nccl-tests' #wrong) in all_reduce of 1KiB: "
        "rank 0: 256 wrong, first at element 0: 2 instead of 1"
    )


class TwoRankView:
    """What one rank's Group answers when its calls take 1 ms (a stepping clock) and its peer's
    take 5 ms: the slowest of the two, without a second process."""

    def __init__(self) -> None:
        self.clock, self.ranks, self.barriers = SteppingClock(0.0), Ranks(0, 2), 0

    def call(self) -> None:
        self.clock.now_s += 1e-3

    def barrier(self) -> None:
        self.barriers += 1

    def slowest(self, values: list[float]) -> list[float]:
        return [max(value, 5e-3) for value in values]


def test_every_rank_plans_from_and_reports_the_slowest_rank() -> None:
    view, budget = TwoRankView(), Profile.QUICK.timing
    plan, samples_s = collectives_worker.time_rounds(view.call, budget, view)
    # planned from the peer's 5 ms, not this rank's 1 ms
    assert plan == plan_rounds(5e-3, budget)
    assert samples_s == [5e-3] * plan.rounds
    # each round starts at a barrier, a calibration round too
    assert view.barriers == plan.rounds + (plan.iterations > 1)


# ---- cases, skips, the launch --------------------------------------------------------------------


def test_cases_cover_every_collective_over_the_profiles_ladder() -> None:
    ids = [c.case_id for c in collectives.cases(ctx(profile="quick"))]
    assert len(ids) == 6 * 2
    assert (
        ids[0] == "collectives/all_reduce-32KiB-x2-gloo"
        and ids[-1] == "collectives/sendrecv-32MiB-x2-gloo"
    )
    # only the device's type is read: no GPU needed
    cuda = collectives.cases(ctx("cuda", "quick", nproc=8))
    assert {c.backend for c in cuda} == {"nccl"} and max(c.size for c in cuda) == 2**30
    assert len(collectives.cases(ctx(profile="smoke"))) == 12


def test_what_a_device_cannot_run_is_skipped_with_the_reason(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    gpu = torch.device("cuda", 0)
    one_gpu = CollectiveCase("all_reduce", "fp32", 1024, 1, "nccl")
    assert collectives.skip_reason(one_gpu, gpu) == (
        "collectives need two or more ranks: --nproc is 1 (this machine has 1 GPU)"
    )
    on_mps = collectives.skip_reason(
        CollectiveCase("broadcast", "fp32", 1024, 2, "gloo"), torch.device("mps")
    )
    assert (
        on_mps
        == "collectives run on cpu (gloo) or cuda (nccl): torch.distributed has no backend for mps"
    )
    tiny = CollectiveCase("all_gather", "fp32", 256, 128, "gloo")
    assert (
        collectives.skip_reason(tiny, CPU)
        == "256B holds less than one fp32 element per rank over 128 ranks"
    )
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda device: SimpleNamespace(total_memory=8 * 2**30)
    )
    big = CollectiveCase("all_reduce", "fp32", 4 * 2**30, 2, "nccl")
    assert (
        collectives.skip_reason(big, gpu)
        == "4GiB needs about 16.0 GiB per GPU (4x the size); this GPU has 8 GiB"
    )
    assert collectives.skip_reason(replace(big, size=2**30), gpu) is None
    monkeypatch.setattr(dist, "is_nccl_available", lambda: False)
    assert (
        collectives.skip_reason(replace(big, size=2**30), gpu)
        == "this torch was built without NCCL"
    )


POINT = {
    "op": "all_reduce",
    "size": 2**20,
    "iterations": 8,
    "samples_s": [2e-3, 1e-3, 4e-3],
    "wrong": 0,
    "mismatches": [],
}


def fake_report(key: collectives.LaunchKey) -> dict:
    return {
        "world_size": key.world_size,
        "backend": key.backend,
        "points": [dict(POINT, op=op, size=size) for op, size in sorted(key.points())],
    }


def test_one_launch_times_the_whole_ladder_and_a_repeated_case_launches_again(monkeypatch) -> None:
    launches = []

    def fake_launch(command, result_json, timeout_s, stall_s):
        launches.append(command)
        return fake_report(
            collectives.launch_key(collectives.cases(context)[0], context, collectives.WORKER)
        )

    monkeypatch.setattr(torchrun_launch, "launch", fake_launch)
    context = ctx()
    points = [collectives.set_up(case, context).fn() for case in collectives.cases(context)]
    assert len(launches) == 1 and len(points) == 12 and "--sizes=1024,65536" in launches[0]
    # every result taken: nothing kept
    assert collectives._LAUNCHED == {}
    first, second = collectives.cases(context)[:2]
    # the first case again before the rest: measured again
    for case, launched in ((first, 2), (first, 3), (second, 3)):
        collectives.set_up(case, context).fn()
        assert len(launches) == launched
    collectives._LAUNCHED.clear()


def test_a_failed_launch_fails_every_case_with_its_reason_once(monkeypatch) -> None:
    launches = []

    def failing_launch(command, result_json, timeout_s, stall_s):
        launches.append(command)
        raise RuntimeError("torchrun exited 1: rank 1 exitcode -9 (SIGKILL)")

    monkeypatch.setattr(torchrun_launch, "launch", failing_launch)
    context, rows = ctx(), []
    for case in collectives.cases(context)[:3]:
        # an unexpected failure: recorded, then re-raised for pytest
        with pytest.raises(RuntimeError):
            run_case(case, collectives.WORKLOAD, context, {}, rows.append)
    assert len(launches) == 1 and [row["status"] for row in rows] == ["failed"] * 3
    assert {row["reason"] for row in rows} == {
        "RuntimeError: torchrun exited 1: rank 1 exitcode -9 (SIGKILL)"
    }
    collectives._LAUNCHED.clear()


def test_figures_are_the_slowest_ranks_median() -> None:
    from gpubench.harness.core.stats import summarize

    case = CollectiveCase("all_reduce", "fp32", 2**20, 4, "gloo")
    point = POINT
    figures = collectives.point_figures(case, point, summarize(point["samples_s"]))
    # the median of the slowest rank's rounds
    assert figures["algbw_gbps"] == pytest.approx(2**20 / 2e-3 / 1e9)
    # 2 * 3 / 4
    assert figures["busbw_gbps"] == pytest.approx(1.5 * figures["algbw_gbps"])
    assert figures["iterations"] == 8 and figures["wrong_elements"] == 0 and figures["flags"] == []
    busy = collectives.point_figures(
        case, dict(point, launch_busy_frac=0.6), summarize(point["samples_s"])
    )
    assert (
        busy["flags"] == ["busy"]
        and "other processes used 60% of the CPU during the launch" in busy["reason"]
    )
    with pytest.raises(WrongResult, match="3 elements wrong"):
        collectives.point_figures(
            case, dict(point, wrong=3, mismatches=[[2, 3, 7, 1.0, 2.0]]), summarize([1e-3])
        )


def test_a_standalone_worker_writes_a_row_per_size(tmp_path) -> None:
    """The multi-node recipe's rank 0 (here without torchrun): ok rows with figures, a wrong one
    failed."""
    good = {
        "op": "broadcast",
        "size": 4096,
        "iterations": 4,
        "samples_s": [1e-4, 2e-4],
        "wrong": 0,
        "mismatches": [],
    }
    bad = dict(good, op="all_reduce", wrong=1024, mismatches=[[1, 1024, 0, 4.0, 3.0]])
    report = {"world_size": 2, "backend": "gloo", "points": [good, bad]}
    csv_path = torchrun_launch.write_rows(collectives_worker.rows(report), tmp_path, CPU)
    ok, failed = read_rows(csv_path)
    assert (ok["case_id"], ok["status"], ok["iterations"]) == (
        "collectives/broadcast-4KiB-x2-gloo",
        "ok",
        4,
    )
    # a list would be written as "[]"
    assert ok["busbw_gbps"] == pytest.approx(4096 / 1.5e-4 / 1e9) and not ok["flags"]
    assert failed["status"] == "failed" and failed["wrong_elements"] == 1024
    assert "rank 1: 1024 wrong, first at element 0: 4 instead of 3" in failed["reason"]


# ---- the report
# ------------------------------------------------------------------------------------


def test_the_summary_row_is_all_reduce_busbw_at_the_largest_size() -> None:
    cases = pd.DataFrame(
        {
            "machine": ["a", "a", "a", "b"],
            "workload": ["collectives"] * 4,
            "op": ["all_reduce", "all_reduce", "broadcast", "all_reduce"],
            "size": [2**20, 2**25, 2**30, 2**20],
            "busbw_gbps": [9.0, 5.0, 50.0, 7.0],
            "spread": [float("nan"), 0.1, 0.0, float("nan")],
            "setting": [
                "all_reduce-1MiB-x2-gloo",
                "all_reduce-32MiB-x2-gloo",
                "broadcast-1GiB-x2-gloo",
                "all_reduce-1MiB-x2-gloo",
            ],
        }
    )
    assert declared_summary(cases, "a") == {
        "all_reduce busbw, largest size": "5 GB/s (all_reduce-32MiB-x2-gloo) ±10%"
    }
    assert declared_summary(cases, "b") == {
        "all_reduce busbw, largest size": "7 GB/s (all_reduce-1MiB-x2-gloo)"
    }
    assert declared_summary(cases, "c") == {}
    assert spec_for("collectives").report.plot.logx and spec_for("collectives").report.plot.logy


# ---- through torchrun
# --------------------------------------------------------------------------------

CORRUPT_WORKER = """
from dataclasses import replace

import torch
import torch.distributed as dist

from gpubench.harness.workloads import collectives_worker
from gpubench.harness.workloads.common.collective_ops import COLLECTIVES


def adds_a_wrong_tensor(buffers, ranks):
    if ranks.rank == 1:
        buffers.result.add_(torch.ones_like(buffers.result))
    dist.all_reduce(buffers.result)


if __name__ == "__main__":
    broken = replace(COLLECTIVES["all_reduce"], call=adds_a_wrong_tensor)
    collectives_worker.run_as_script(dict(COLLECTIVES, all_reduce=broken))
"""


@pytest.mark.process
def test_a_rank_adding_the_wrong_tensor_fails_the_all_reduce_rows_only(
    tmp_path, monkeypatch
) -> None:
    """One torchrun launch of two gloo ranks (~15-40 s here): the corruption must travel through a
    real reduction between processes, and the suite's launch and rows must report it."""
    (tmp_path / "corrupt_worker.py").write_text(CORRUPT_WORKER)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ["PYTHONPATH"]]))
    context = ctx()
    workload = Workload(
        collectives.SPEC, collectives.cases, partial(collectives.set_up, worker="corrupt_worker")
    )
    rows = [run_case(case, workload, context, {}, None) for case in collectives.cases(context)]
    failed = [row for row in rows if row["status"] == "failed"]
    assert [(row["op"], row["size"]) for row in failed] == [
        ("all_reduce", 1024),
        ("all_reduce", 65536),
    ]
    # both ranks hold the wrong sum
    assert failed[0]["wrong_elements"] == 512 and failed[0]["reason"].startswith(
        "wrong result: 512 elements wrong (nccl-tests' #wrong) in all_reduce of 1KiB: rank 0: 256 "
        "wrong, first at element 0: 4 instead of 3; rank 1: 256 wrong, first at element 0: 4 "
        "instead of 3"
    )
    ok = [row for row in rows if row["status"] == "ok"]
    assert len(ok) == 10 and all(row["busbw_gbps"] > 0 and row["wrong_elements"] == 0 for row in ok)


@pytest.mark.process
def test_a_run_writes_every_collective_correct_and_its_report(tmp_path) -> None:
    """gpubench run, as a user runs it: one build process, one torchrun launch (~30-60 s here)."""
    command = [
        *GPUBENCH,
        "run",
        "--device",
        "cpu",
        "--profile",
        "smoke",
        "-k",
        "collectives",
        "--results-dir",
        str(tmp_path),
        "--run-id",
        "coll",
    ]
    done = subprocess.run(
        command, check=False, cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    with open(tmp_path / "coll.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert (
        len(rows) == 12
        and {r["status"] for r in rows} == {"ok"}
        and {r["wrong_elements"] for r in rows} == {"0"}
    )
    assert {r["op"] for r in rows} == set(COLLECTIVES) and all(
        float(r["busbw_gbps"]) > 0 for r in rows
    )
    report = (tmp_path / "coll-report" / "report.md").read_text(encoding="utf-8")
    assert "## Collectives (interconnect)" in report and "Smoke-profile rows only" in report
    summary = summary_as_quick(tmp_path / "coll.csv", tmp_path / "as-quick")
    # before the outcome
    assert summary.index("| all_reduce busbw, largest size | ") < summary.index(
        "flagged · not ok rows"
    )
    assert (
        "(all_reduce-64KiB-x2-gloo)" in summary
        and (tmp_path / "coll-report" / "collectives.png").stat().st_size > 0
    )


TWO_GPUS = torch.cuda.is_available() and torch.cuda.device_count() >= 2


@pytest.mark.skipif(not TWO_GPUS, reason="nccl between ranks needs two CUDA GPUs")
def test_nccl_ranks_time_and_check_every_collective(tmp_path) -> None:
    context = ctx("cuda", "smoke", nproc=2)
    rows = [
        run_case(case, collectives.WORKLOAD, context, {}, None)
        for case in collectives.cases(context)
    ]
    assert {row["status"] for row in rows} == {"ok"} and all(row["busbw_gbps"] > 0 for row in rows)


@pytest.mark.parametrize("name", sorted(COLLECTIVES))
def test_a_ranks_check_holds_no_more_than_the_memory_the_skip_counts(name):
    """memory_skip refuses a size whose MEMORY_PER_SIZE multiple does not fit the GPU: the check's
    own buffers (inputs, result, expected result, their temporaries, the comparison) must fit that
    multiple."""
    from gpubench.harness.devices.device import cpu_peak_bytes

    # small: what this process's allocator keeps after the test stays small for the tests after it
    size = 2**20
    collective, ranks = COLLECTIVES[name], Ranks(1, 2)
    count = elements(name, size, ranks.world_size)

    def check_buffers():
        buffers = collective.make(count, ranks, CPU)
        mismatch(buffers.result, collective.expected(count, ranks, CPU))

    assert cpu_peak_bytes(check_buffers) <= MEMORY_PER_SIZE * size
