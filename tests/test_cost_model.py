"""The plan's value and cost before any case runs: which cases each workload puts first (headline),
what the cost model predicts from the work of a call and a device's rates, and the probe of those
rates."""

from __future__ import annotations

import importlib
import time
from dataclasses import replace

import pytest
import torch

from gpubench.harness.catalog.profiles import Profile
from gpubench.harness.budget.cost_model import Rates, Work, call_s, predicted_build_s
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.measurement.timing import SyncedClock

CPU = torch.device("cpu")
RATES = Rates(
    {"fp32": 4e11, "bf16": 1.6e12},
    bytes_per_s=3e10,
    launch_s=2e-6,
    randn_per_s=4e8,
    touch_bytes_per_s=2e9,
    process_start_s=3.0,
)
WORKLOADS = (
    "matmul",
    "elementwise",
    "attention",
    "transformer",
    "collectives",
    "ddp",
    "memory_strategies",
    "mnist_epoch",
    "time_to_accuracy",
    "transfer",
    "conv2d",
    "inference",
    "selfcheck",
)


def workload(name: str):
    return importlib.import_module(f"gpubench.harness.workloads.{name}").WORKLOAD


def quick_cpu(nproc: int = 2) -> BuildContext:
    return replace(BuildContext(CPU, Profile.QUICK, SyncedClock(CPU)), nproc=nproc)


def headline_ids(ctx: BuildContext) -> set[str]:
    return {
        case.case_id
        for name in WORKLOADS
        for case in workload(name).headline(workload(name).cases(ctx))
    }


def test_the_quick_cpu_headline_is_every_summary_row_the_mission_asks_for():
    from gpubench.harness.workloads.matmul import ladder

    ids = headline_ids(quick_cpu())
    # 2048 where the CPU has native bf16, else where emulation stops
    bf16_n = max(ladder("quick", CPU, "bf16"))
    assert {
        "mnist_epoch/guide-template",
        "mnist_epoch/preloaded-raced",
        "time_to_accuracy/template",
        "time_to_accuracy/speedrun",
        "ddp/ddp-x1-gloo-bs128",
        "ddp/ddp-x2-gloo-bs128",
        "matmul/fp32-n2048",
        f"matmul/bf16-n{bf16_n}",
        "memory_strategies/baseline-bs256",
        "collectives/all_reduce-32MiB-x2-gloo",
        "transformer/tiny-fp32-math",
    } <= ids
    # the DRAM-sized one
    assert sum(i.startswith("elementwise/add-fp32-2^") for i in ids) == 1
    # one per pass
    assert sum(i.startswith("attention/") for i in ids) == 2
    # the settings tables are not headline: the raced epoch's neighbours, the other strategies,
    # DataParallel
    assert not any(
        i.startswith(("conv2d/", "inference/", "selfcheck/")) or "dataparallel" in i for i in ids
    )


def test_each_headline_case_is_one_of_its_workloads_cases():
    ctx = quick_cpu()
    for name in WORKLOADS:
        cases = list(workload(name).cases(ctx))
        assert set(workload(name).headline(cases)) <= set(cases), name


def test_a_call_costs_its_flops_at_its_dtypes_rate_its_bytes_and_its_launches():
    work = Work(flops=4e11, dtype="bf16", efficiency=0.5, bytes=3e10, launches=1000, host_s=0.25)
    assert call_s(work, RATES) == pytest.approx(4e11 / (1.6e12 * 0.5) + 1.0 + 1000 * 2e-6 + 0.25)
    # an unprobed dtype: fp32's rate
    assert call_s(replace(work, dtype="fp16"), RATES) > call_s(work, RATES)


def test_a_fixed_build_is_its_calls_and_setup_and_a_micro_case_is_about_the_profiles_rounds():
    epoch = Work(flops=1.6e12, efficiency=0.4, calls=1, processes=1, random_values=4e8)
    build_s, one_s = predicted_build_s(epoch, RATES, Profile.QUICK.timing)
    assert one_s == pytest.approx(10.0, rel=0.01) and build_s == pytest.approx(
        10.0 + 3.0 + 1.0, abs=0.1
    )
    micro_s, _ = predicted_build_s(Work(flops=2e6), RATES, Profile.QUICK.timing)
    assert Profile.QUICK.timing.target_s <= micro_s <= 2 * Profile.QUICK.timing.target_s + 0.1


def test_the_cpu_epoch_and_time_to_accuracy_are_predicted_above_the_micro_cases():
    """What the budget needs to know before the first case: an epoch costs seconds, not a share of
    0.7 s."""
    ctx, budget = quick_cpu(), Profile.QUICK.timing

    def cost(name: str, case_id: str) -> float:
        case = next(c for c in workload(name).cases(ctx) if c.case_id == case_id)
        return predicted_build_s(workload(name).work(case, ctx), RATES, budget)[0]

    epoch_s = cost("mnist_epoch", "mnist_epoch/guide-template")
    assert 5.0 < epoch_s < 60.0
    assert cost("time_to_accuracy", "time_to_accuracy/template") > cost(
        "time_to_accuracy", "time_to_accuracy/speedrun"
    )
    assert cost("ddp", "ddp/ddp-x2-gloo-bs128") > RATES.process_start_s
    assert cost("matmul", "matmul/fp32-n512") < 1.0


def test_the_probe_times_this_device_in_about_a_second():
    from gpubench.harness.devices.rates import probe_rates

    rates = probe_rates(CPU, process_start_s=0.2)
    # tf32 is a CUDA mode
    assert rates.flops_per_s["fp32"] > 1e9 and "tf32" not in rates.flops_per_s
    assert rates.bytes_per_s > 1e8 and rates.touch_bytes_per_s > 1e7 and rates.randn_per_s > 1e6
    assert 0 < rates.launch_s < 1e-3
    # a forked build's start is no measure of a fresh interpreter's
    assert rates.process_start_s >= 2.5


def test_the_run_says_how_the_cost_model_did_against_the_builds_it_priced():
    from gpubench.harness.budget.cost_model import prediction_line

    line = prediction_line([(2.0, 1.0), (1.0, 1.0), (0.5, 1.0), (3.0, 2.0)])
    assert line == (
        "cost model: the 4 case builds it priced before their first row took 1.25x its prediction "
        "(median; middle half 0.88-1.62x)"
    )
    # too few to say anything
    assert prediction_line([(1.0, 1.0), (1.0, 0.0)]) is None


def test_the_probe_stops_repeating_a_call_that_is_already_long():
    """A slow call (a half-precision matmul on a CPU without native fp16) is timed once after its
    warm-up, not five times: the probe's seconds come out of the run's budget."""
    from gpubench.harness.devices.rates import ENOUGH_S, best_s

    calls = []
    best_s(lambda: (calls.append(1), time.sleep(ENOUGH_S))[0], CPU)
    # the warm-up and one timed call
    assert len(calls) == 2
    calls.clear()
    best_s(lambda: calls.append(1), CPU)
    # a short call keeps its repeats
    assert len(calls) == 6
