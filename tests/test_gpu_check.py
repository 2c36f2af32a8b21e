"""scripts/gpu-check: its dry run on the CPU (every step, its timeout, the packed output in one
folder), and its step runner's timeouts and budget, without a GPU."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from runs import write_idx_folder

ROOT = Path(__file__).resolve().parent.parent
STEPS = (
    "data",
    "nvml-probe",
    "cuda-tests",
    "env",
    "smoke",
    "headline",
    "transformer",
    "epoch",
    "attention",
    "ddp",
    "compiled",
    "ab",
)


def load_gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    # dataclasses look their module up while the class is made
    sys.modules["gpu_check"] = module
    spec.loader.exec_module(module)
    return module


def summary_rows(log: str) -> dict[str, list[str]]:
    table = log.split("=== summary\n", 1)[1].splitlines()[1:]
    return {line.split()[0]: line.split(None, 4) for line in table if line.strip()}


@pytest.mark.process
def test_the_dry_run_shows_every_step_its_timeout_and_packs_one_folder(tmp_path):
    """Every step made tiny (-k fp32-n64), DDP and the A/A session skipped by name to stay under a
    minute here; the CUDA-only steps skip themselves with the reason."""
    out = tmp_path / "out"
    # brought along, as on a GPU machine: the check does not lean on Debian's package
    write_idx_folder(tmp_path / "fashion")
    env = dict(
        os.environ,
        PYTHON=sys.executable,
        GPU_CHECK_K="fp32-n64",
        GPU_CHECK_SKIP="transformer,epoch,attention,ddp,ab",
    )
    done = subprocess.run(
        [
            str(ROOT / "scripts" / "gpu-check"),
            "--dry-run",
            str(out),
            "--fashion-dir",
            str(tmp_path / "fashion"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    # what a remote runner brings back
    assert sorted(p.name for p in out.iterdir()) == ["gpu-check.log", "gpu-check.tar.gz"]
    log = (out / "gpu-check.log").read_text(encoding="utf-8")
    rows = summary_rows(log)
    assert tuple(rows)[:-1] == STEPS and "total" in rows
    assert (
        rows["data"][2] == "0" and f"Fashion-MNIST from {tmp_path / 'fashion'}" in rows["data"][4]
    )
    for name in ("cuda-tests", "env", "smoke", "headline"):
        assert rows[name][2] == "0" and float(rows[name][3]) > 0 and f"{name} (timeout " in log
    assert rows["nvml-probe"][2] == "-" and "needs CUDA" in rows["nvml-probe"][4]
    assert rows["compiled"][2] == "-" and "needs CUDA" in rows["compiled"][4]
    assert rows["ddp"][2] == "-" and "GPU_CHECK_SKIP" in rows["ddp"][4]
    # each step's own timeout, shown
    assert int(rows["smoke"][1]) == 110 and int(rows["cuda-tests"][1]) == 30
    assert (
        "-m not distributed" in log
        and "--budget 80s" in log
        and "GPUBENCH_DOWNLOAD" not in done.stderr
    )
    with tarfile.open(out / "gpu-check.tar.gz") as tar:
        names = set(tar.getnames())
        csv = tar.extractfile("gpu-check/results/smoke.csv").read().decode()
    assert {
        "gpu-check/gpu-check.log",
        "gpu-check/summary.txt",
        "gpu-check/results/smoke.csv",
        "gpu-check/results/headline.csv",
        "gpu-check/steps/3-smoke.log",
        "gpu-check/steps/1-cuda-tests.log",
    } <= names
    assert "matmul/fp32-n64" in csv and ",ok," in csv


@pytest.mark.process
def test_a_folder_that_holds_a_check_is_refused_in_one_line(tmp_path):
    (tmp_path / "gpu-check.tar.gz").write_bytes(b"")
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "--dry-run", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (
        done.returncode == 1
        and "already holds a check: give a new folder" in done.stderr
        and len(done.stderr.splitlines()) == 1
    )


@pytest.fixture
def check(tmp_path):
    gpu_check = load_gpu_check()
    (tmp_path / "gpu-check" / "steps").mkdir(parents=True)
    with open(tmp_path / "gpu-check.log", "w", encoding="utf-8") as log:
        yield gpu_check, gpu_check.Check(tmp_path, tmp_path / "gpu-check", "cpu", True, log)


@pytest.mark.process
def test_a_step_past_its_timeout_is_killed_recorded_and_the_next_step_still_runs(check):
    gpu_check, state = check
    slow = gpu_check.run_one(
        state,
        0,
        gpu_check.Step("slow", [sys.executable, "-c", "import time; time.sleep(30)"], 1, "sleeps"),
    )
    after = gpu_check.run_one(
        state, 1, gpu_check.Step("after", [sys.executable, "-c", "print('ran')"], 30, "prints")
    )
    assert (slow.code, slow.note, slow.timeout_s) == (124, "timed out", 1) and slow.wall_s < 15
    assert (after.code, after.note) == (0, "")


@pytest.mark.process
def test_steps_are_cut_to_the_budget_left_and_optional_ones_skipped(check):
    gpu_check, state = check
    # 40 s left
    state.start_s = time.monotonic() - (gpu_check.BUDGET_S - gpu_check.PACKING_RESERVE_S - 40)
    cut = gpu_check.run_one(
        state, 0, gpu_check.Step("cut", [sys.executable, "-c", "pass"], 300, "a step of 300 s")
    )
    optional = gpu_check.run_one(
        state, 1, gpu_check.Step("optional", ["false"], 120, "runs if 60 s are left", min_left_s=60)
    )
    assert cut.code == 0 and 35 <= cut.timeout_s <= 40
    assert optional.code is None and (
        f"s of the {gpu_check.BUDGET_S:.0f} s budget left, the step needs 60 s" in optional.note
    )


def test_the_nvml_probe_reports_each_question_on_its_own_line():
    from fakes import FakeNvml

    gpu_check = load_gpu_check()
    nvml = FakeNvml(
        not_supported=("nvmlDeviceGetGraphicsRunningProcesses",),
        pids=(4242,),
        instant_power_mw=512_000,
    )
    lines = gpu_check.nvml_report(nvml, "gpu0", 4242)
    assert lines[0] == "compute processes: [4242]; own pid 4242 found"
    assert (
        lines[1] == "power average (nvmlDeviceGetPowerUsage): 300.0 W"
        and lines[2] == "power instantaneous (NVML_FI_DEV_POWER_INSTANT): 512.0 W"
    )
    assert lines[3] == "energy counter: 1000.0 J since the driver loaded"
    assert "throttle_bits" in lines[4] and "power instant" in lines[4]
    hidden = gpu_check.nvml_report(
        FakeNvml(not_supported=("nvmlDeviceGetComputeRunningProcesses",)), "gpu0", 4242
    )
    assert (
        hidden[0].startswith("compute processes: not answered; the busy-GPU check is off")
        and "not answered (" in hidden[2]
    )
    assert "NOT found" in gpu_check.nvml_report(FakeNvml(pids=(1,)), "gpu0", 4242)[0]


def test_without_fashion_mnist_the_data_step_fails_and_the_runs_use_synthetic_data(
    check, monkeypatch
):
    """No copy brought along and none on the machine: the check goes on with synthetic data, and its
    summary says time to accuracy was not measured (the data row fails)."""
    gpu_check, state = check
    monkeypatch.setattr(gpu_check, "FASHION_PLACES", ())
    assert gpu_check.prepare_data(state, None, state.work / "data") == ["--dataset", "synthetic"]
    assert [(o.name, o.code, o.note) for o in state.outcomes] == [
        ("data", 1, "no Fashion-MNIST: synthetic data")
    ]


def gpu_case_keywords(profile: str) -> list[set[str]]:
    """What pytest's -k matches for each case a CUDA build of `profile` collects: its test's name
    with the case id, its bench module and folder, its workload's markers (lower case, as -k
    compares)."""
    import importlib
    import re

    import torch

    from gpubench.harness.measurement.context import BuildContext
    from gpubench.harness.measurement.timing import SyncedClock

    # a case list needs no GPU
    ctx = BuildContext(torch.device("cuda", 0), profile, SyncedClock(torch.device("cpu")))
    keywords = []
    for bench in sorted((ROOT / "benches").glob("bench_*.py")):
        text = bench.read_text(encoding="utf-8")
        module = re.search(r"from gpubench\.harness\.workloads\.(\w+) import WORKLOAD", text)
        test = re.search(r"^def (test_\w+)\(", text, re.M)
        if module is None or test is None:
            continue
        workload = importlib.import_module(f"gpubench.harness.workloads.{module.group(1)}").WORKLOAD
        for case in workload.cases(ctx):
            keywords.append(
                {f"{test.group(1)}[{case.test_id}]", bench.name, "benches", *workload.spec.markers}
            )
    return [{k.lower() for k in names} for names in keywords]


def selected(step, profile: str) -> list[str]:
    """The case ids (test names) a step's -k and -m select from the CUDA case list of `profile`."""
    from _pytest.mark.expression import Expression

    # after python's own -m
    argv = step.argv[step.argv.index("run") :]
    k = Expression.compile(argv[argv.index("-k") + 1]) if "-k" in argv else None
    m = Expression.compile(argv[argv.index("-m") + 1]) if "-m" in argv else None
    chosen = []
    for names in gpu_case_keywords(profile):
        if k is not None and not k.evaluate(
            lambda word, names=names: any(word.lower() in name for name in names)
        ):
            continue
        if m is not None and not m.evaluate(lambda mark, names=names: mark in names):
            continue
        chosen.append(next(n for n in names if n.startswith("test_")))
    return chosen


@pytest.fixture
def gpu_plan(tmp_path, monkeypatch):
    """The steps a real (not dry) run on a CUDA machine takes, without running one."""
    monkeypatch.delenv("GPU_CHECK_K", raising=False)
    gpu_check = load_gpu_check()
    with open(tmp_path / "log", "w", encoding="utf-8") as log:
        state = gpu_check.Check(tmp_path, tmp_path / "gpu-check", "cuda", False, log)
        yield (
            gpu_check,
            {step.name: step for step in gpu_check.steps(state, ["--dataset", "fashion-mnist"])},
        )


def test_the_required_steps_fit_the_window_and_each_run_ends_by_its_own_budget(gpu_plan):
    gpu_check, steps = gpu_plan
    required = [step for step in steps.values() if not step.min_left_s]
    assert (
        sum(step.timeout_s for step in required) <= gpu_check.BUDGET_S - gpu_check.PACKING_RESERVE_S
    )
    # a rented machine's one command: 10 minutes, its start not counted
    assert gpu_check.BUDGET_S <= 600
    runs = [step for step in steps.values() if "run" in step.argv]
    assert {step.name for step in runs} == {
        "smoke",
        "headline",
        "transformer",
        "epoch",
        "attention",
        "ddp",
        "compiled",
    }
    for step in runs:
        budget_s = float(step.argv[step.argv.index("--budget") + 1].rstrip("s"))
        # the run's budget ends it, with its rows, before the timeout
        assert budget_s + 20 <= step.timeout_s, step.name
    for step in steps.values():
        # an optional step runs only when all of it fits
        assert not step.min_left_s or step.min_left_s >= step.timeout_s


def test_the_gpu_steps_reach_every_workload_and_the_figures_the_check_exists_for(gpu_plan):
    _, steps = gpu_plan
    smoke = selected(steps["smoke"], "smoke")
    workloads = {name.split("[")[0] for name in smoke}
    assert workloads == {
        f"test_{w}"
        for w in (
            "attention",
            "conv2d",
            "elementwise",
            "inference",
            "matmul",
            "memory_strategies",
            "mnist_epoch",
            "selfcheck",
            "speedup",
            "time_to_accuracy",
            "transfer",
            "transformer",
        )
    }
    headline = selected(steps["headline"], "quick")
    # GPT-2 small's eager MFU alone in its step: its build fits no share of a budget split over many
    # cases
    assert selected(steps["transformer"], "quick") == [
        "test_transformer[gpt2-125m-bf16-flash-adamw-fused]"
    ]
    assert not any(name.startswith("test_transformer[") for name in headline)
    assert {"test_matmul[bf16-n8192]", "test_matmul[fp32-n8192]"} <= set(headline)
    transfers = [name for name in headline if name.startswith("test_transfer[")]
    assert any("pinned" in name for name in transfers) and any(
        "pageable" in name for name in transfers
    )
    assert any(name.startswith("test_elementwise[") for name in headline) and any(
        name.startswith("test_selfcheck[") for name in headline
    )
    epoch = selected(steps["epoch"], "quick")
    assert (
        "test_mnist_epoch[guide-template]" in epoch and "test_time_to_accuracy[template]" in epoch
    )
    attention = selected(steps["attention"], "quick")
    assert {int(name.split("-s")[1].split("-")[0]) for name in attention} == {1024, 4096, 16384}
    assert all("bf16" in name for name in attention)
    assert {name.split("[")[0] for name in selected(steps["ddp"], "smoke")} == {
        "test_ddp",
        "test_collectives",
    }
    assert "test_transformer[gpt2-125m-bf16-compile-default-flash-adamw-fused]" in selected(
        steps["compiled"], "full"
    )
