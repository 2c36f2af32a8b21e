"""Everything a run needs, checked before the first case: each bad value is one UsageError line
naming the fix (the plugin's usage error, exit 4)."""

from __future__ import annotations

import os
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any
from collections.abc import Callable

import torch
from pytest_benchmark.utils import load_timer

from gpubench.harness.core.console import CONSOLE
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.devices.datasets import (
    check_dataset_files,
    check_dataset_request,
    default_data_root,
    usable_data_root,
)
from gpubench.harness.devices.cpu_limits import usable_cores
from gpubench.harness.core.exits import UsageError
from gpubench.harness.devices.device import check_nproc, default_nproc, resolve_device
from gpubench.harness.devices.energy import EnergyMeter, energy_counter, gpu_sampler
from gpubench.harness.devices.env import machine_identity
from gpubench.harness.devices.machine_load import LoadMeter, wait_quiet
from gpubench.harness.core.model_spec import ModelSpec
from gpubench.harness.core.options import RESULTS_DIR_DEFAULT, RunOptions
from gpubench.harness.pytest_plugin.benchmark_json import json_path
from gpubench.harness.budget.clock import (
    DeadlinePassed,
    cut_after,
    grace_s,
    note_run_began,
    run_deadline_s,
)
from gpubench.harness.core.duration_text import format_duration
from gpubench.harness.catalog.profiles import check_profile
from gpubench.harness.records.results import (
    check_output_file,
    check_results_dir_early,
    check_run_id,
    new_run_id,
)
from gpubench.harness.pytest_plugin.run_state import RunState
from gpubench.harness.measurement.run_records import RunRecords
from gpubench.harness.records.store import results_dir_for
from gpubench.harness.measurement.timing import SyncedClock, install_build_clock
from gpubench.harness.workloads.common.user_model import check_model


DEFAULT_TIMERS = (
    "",
    "None",
    "time.perf_counter",
    "gpubench.harness.measurement.timing.build_clock",
)


def user_base_clock(chosen: Any) -> Callable[[], float]:
    """A --benchmark-timer the user chose stays the host clock underneath the synced one."""
    name = str(chosen or "")
    if name in DEFAULT_TIMERS:
        return time.perf_counter
    try:
        timer = load_timer(name)
    except (ImportError, AttributeError) as error:
        raise UsageError(
            f"--benchmark-timer cannot be loaded ({error}) — pass a dotted name such as "
            "time.perf_counter"
        ) from None
    # pytest-benchmark wraps it in a NameWrapper
    return getattr(timer, "target", timer)


def checked_model(spec: ModelSpec | None, budget_s: float | None) -> ModelSpec | None:
    """The model made and fed one batch on the CPU before any case (cut after the budget and its
    grace)."""
    if spec is None:
        return None
    limit_s = budget_s + grace_s(budget_s) if budget_s is not None else None
    try:
        with cut_after(limit_s, "") if limit_s is not None else nullcontext():
            check_model(spec)
    except DeadlinePassed:
        raise UsageError(
            f"--model {spec.target}: making the model and one forward did not return within "
            f"{format_duration(limit_s or 0)} (the run's budget and its grace) — "
            "make the factory return, or raise --budget if it is only slow"
        ) from None
    return spec


# beyond it torch's threads only queue for the cores
MAX_THREADS_PER_CORE = 4


def check_threads(threads: int | None) -> int | None:
    """--threads N: from 1 to a few per core (None: torch's default, one per core)."""
    cores = usable_cores()
    if threads is not None and not 1 <= threads <= MAX_THREADS_PER_CORE * cores:
        raise UsageError(
            f"--threads {threads}: use 1 to {MAX_THREADS_PER_CORE * cores} torch threads "
            f"(this process may use {cores} cores), such as --threads 1"
        )
    return threads


def _checked(
    run: RunOptions, build: int | None, collect_only: bool, benchmark_json: Any
) -> dict[str, Any]:
    """What only the machine that runs can check: the device, the folders and files, the cores, the
    model."""
    device = resolve_device(run.device)
    # absolute: a test or factory that changes the working folder does not send rows elsewhere
    results_dir = Path(
        os.path.abspath(
            results_dir_for(run.store, run.results_dir, RESULTS_DIR_DEFAULT, machine_identity)
        )
    )
    # a later build (build K > 0) appends to its run's file
    if run.run_id is not None:
        check_run_id(run.run_id, results_dir, appending=(build or 0) > 0, build=build)
    data_root, warning = usable_data_root(Path(run.data_root or default_data_root()), run.dataset)
    dataset = check_dataset_request(run.dataset, data_root)
    check_dataset_files(dataset, data_root)
    # where the run will write, checked before pytest's header; the results folder again, and made,
    # once a case records
    if not collect_only:
        check_results_dir_early(results_dir)
    if (json_file := json_path(benchmark_json)) is not None:
        check_output_file(json_file, "--benchmark-json")
    return dict(
        model=checked_model(run.model, run.run_budget_s),
        threads=check_threads(run.threads),
        device=device,
        results_dir=results_dir,
        data_root=data_root,
        dataset=dataset,
        warning=warning,
        nproc=check_nproc(default_nproc(device) if run.nproc is None else run.nproc, device),
    )


# pytest-benchmark's default --benchmark-min-rounds: another value was the user's, and gpubench's
# rounds honour it.
BENCHMARK_DEFAULT_MIN_ROUNDS = 5


def make_state(
    run: RunOptions,
    build: int | None,
    benchmark_timer: Any,
    collect_only: bool = False,
    benchmark_json: Any = None,
    benchmark_min_rounds: int | None = None,
    extra_build: bool = False,
    deadline_s: float | None = None,
    budget_given: bool = False,
) -> tuple[RunState, str | None]:
    """The run's state from its options (`build`: the one build of each case this process runs, None
    for every one; `deadline_s`: the run's end from gpubench run; `budget_given`: a plain pytest run
    given --budget, cut at its end too), or UsageError; and a data warning."""
    try:
        checked = _checked(run, build, collect_only, benchmark_json)
    except OSError as error:
        raise UsageError(str(error)) from None
    device: torch.device = checked["device"]
    # before the fingerprint: its torch_threads is what the cases ran with
    if checked["threads"] is not None:
        torch.set_num_threads(checked["threads"])
    if run.wait_quiet_s is not None and not collect_only:
        wait_quiet(device, run.wait_quiet_s, CONSOLE.show_error)
        # the wait is no part of the run: its budget starts now
        note_run_began()
    clock = SyncedClock(device, user_base_clock(benchmark_timer))
    previous_clock = install_build_clock(clock)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    counter, energy_note = energy_counter(device)
    meter = EnergyMeter(counter, energy_note)
    profile = check_profile(run.profile)
    ctx = BuildContext(
        device,
        profile,
        clock,
        checked["nproc"],
        energy=meter,
        telemetry=gpu_sampler(device),
        target_accuracy=run.target_accuracy,
        builds=run.builds,
        build_seconds=run.build_seconds,
        build_calls=run.build_calls,
        model=checked["model"],
        min_rounds=None
        if benchmark_min_rounds in (None, BENCHMARK_DEFAULT_MIN_ROUNDS)
        else int(benchmark_min_rounds),
    )
    records = RunRecords(
        device,
        checked["results_dir"],
        run.run_id or new_run_id(),
        str(profile),
        meter,
        build=build or 0,
    )
    ctx.results_dir = checked["results_dir"]
    ctx.machine_id = lambda: str(
        records.env.get("machine_id") or records.fingerprint_of(device).get("machine_id", "")
    )
    run_end_s = run_deadline(run.run_budget_s, deadline_s)
    state = RunState(
        ctx,
        records,
        checked["data_root"],
        checked["dataset"],
        run.profile_ops,
        only_build=build,
        extra_build=extra_build and build is not None,
        previous_clock=previous_clock,
        budget_s=run.run_budget_s,
        deadline_s=run_end_s,
        end_s=run_end_s if deadline_s is not None or budget_given else None,
    )
    state.threads_given = run.threads is not None
    state.load_meter = None if collect_only else LoadMeter()
    return state, checked["warning"]


def run_deadline(budget_s: float | None, from_run: float | None) -> float | None:
    """The run's end: gpubench run's (`from_run`, the same for every build), else this run's start
    plus its budget (budget.clock.run_deadline_s, the one formula); None without a budget. A plain
    pytest run under a profile's budget shares its time by it, and is cut at it only when its user
    gave --budget."""
    if from_run is not None or budget_s is None:
        return from_run
    return run_deadline_s(budget_s)
