#!/usr/bin/env python3
"""The GPU check: one command for a rented GPU machine that must fit 10 minutes and bring back
everything it measured in two files. `scripts/gpu-check` runs this with unbuffered output.

    scripts/gpu-check OUT                   # on a CUDA machine
    scripts/gpu-check --dry-run OUT         # on any machine: every step on cpu, CUDA-only ones
                                            # skipped with the reason

Every step runs under coreutils `timeout` (its whole process group), capped by what is left of the
budget (GPU_CHECK_BUDGET_S, default 590 s, counted from the start); a failed or timed-out step is
recorded and the next one still runs. Every `gpubench run` step runs under its own --budget, which
ends it with its rows written, half a minute before its timeout. Everything is written into
OUT/gpu-check/ as it goes and packed into OUT/gpu-check.tar.gz after every step (a check cut off
keeps what it measured), beside OUT/gpu-check.log (the whole log); the folder is removed after
packing (--keep keeps it). The report is not built here: unpack the tar elsewhere and run `gpubench
report gpu-check/results --out report/`.

No step downloads anything (GPUBENCH_DOWNLOAD=0): training data is Fashion-MNIST's four `.gz`
files from --fashion-dir, else shared/fashion-mnist/ in the checkout, else Debian's
/usr/share/datasets/fashion-mnist; without them the training cases run on synthetic data (and
time to accuracy is skipped), which the log says.

For tests: GPU_CHECK_K narrows every gpubench step to `-k "<step's selection> and (K)"`, and
GPU_CHECK_SKIP (comma-separated step names) skips steps, each with that reason.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

ROOT = Path(__file__).resolve().parent.parent
# a rented machine's 10-minute command, its start and copies aside
BUDGET_S = float(os.environ.get("GPU_CHECK_BUDGET_S", "590"))
# kept back from the steps' budget for the summary and the tar
PACKING_RESERVE_S = 15.0
# a step that ignores SIGTERM is killed this long after its timeout
KILL_AFTER_S = 10
FASHION_FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)
FASHION_PLACES = (ROOT / "shared" / "fashion-mnist", Path("/usr/share/datasets/fashion-mnist"))


@dataclass
class Step:
    """One command of the check. `timeout_s` is its own limit (the budget left may cut it);
    `min_left_s`: run only if at least this much budget is left (the optional steps);
    `cuda_only`: skipped with its reason in a dry run."""

    name: str
    argv: list[str]
    timeout_s: float
    what: str
    cuda_only: bool = False
    min_left_s: float = 0.0


@dataclass
class Outcome:
    name: str
    timeout_s: float
    # None: not run
    code: int | None
    wall_s: float
    note: str = ""


@dataclass
class Check:
    out: Path
    work: Path
    device: str
    dry_run: bool
    log: TextIO
    start_s: float = field(default_factory=time.monotonic)
    outcomes: list[Outcome] = field(default_factory=list)

    def say(self, text: str) -> None:
        print(text, flush=True)
        self.log.write(text + "\n")
        self.log.flush()

    def left_s(self) -> float:
        return BUDGET_S - PACKING_RESERVE_S - (time.monotonic() - self.start_s)


def gpubench(*args: str) -> list[str]:
    return [sys.executable, "-m", "gpubench.harness.commands.cli", *args]


def selection(base: str | None) -> list[str]:
    """`-k` for a step: its own selection, narrowed by GPU_CHECK_K (tests make every step tiny)."""
    narrow = os.environ.get("GPU_CHECK_K", "")
    parts = [f"({p})" for p in (base, narrow) if p]
    return ["-k", " and ".join(parts)] if parts else []


# a gpubench step's own start (interpreter, torch, CUDA context) and end, beyond its --budget
START_MARGIN_S = 30

# What each measuring step selects (-k), by the bench modules' names. The headline figures a GPU is
# rented for: matmul per dtype, DRAM bandwidth, the clock's self-check, host<->device copies pinned
# and pageable (the guide's transfers); then GPT-2 small's eager training step in bf16 with flash
# attention and the fused optimizer (its MFU) alone; the compiled one has a step of its own, after
# the required ones, for its cold compile (about 30 s on an H200, which no share of a short budget
# holds).
HEADLINE = "bench_matmul or bench_elementwise or bench_selfcheck or bench_transfer"
# a step of its own: its build (~7 s) fits no share of many
GPT2_MFU = "bench_transformer and gpt2-125m-bf16-flash-adamw-fused"
EPOCH = "bench_mnist_epoch or bench_time_to_accuracy"
# every backend, causal or not, at the quick profile's lengths 1k, 4k and 16k
ATTENTION = "bench_attention and bf16"
# a cold max-autotune takes minutes, and no budget stops a compile
COMPILED = "(compile and not max-autotune) or reduce-overhead"


def run_args(check: Check, profile: str, run_id: str, data: list[str], *extra: str) -> list[str]:
    # a dry run exercises the steps, not the machine
    profile = "smoke" if check.dry_run else profile
    return gpubench(
        "run",
        "--device",
        check.device,
        "--profile",
        profile,
        "--results-dir",
        str(check.work / "results"),
        "--run-id",
        run_id,
        "--no-report",
        *data,
        *extra,
    )


def run_step(
    check: Check,
    data: list[str],
    name: str,
    what: str,
    profile: str,
    budget_s: int,
    *args: str,
    cuda_only: bool = False,
    optional: bool = False,
) -> Step:
    """A `gpubench run` step under `--budget budget_s`, timed out START_MARGIN_S later: the run's
    own budget ends it with its rows written and each case's reason, the timeout only if the run
    itself hangs."""
    timeout_s = budget_s + START_MARGIN_S
    return Step(
        name,
        run_args(check, profile, name, data, "--budget", f"{budget_s}s", *args),
        timeout_s,
        what,
        cuda_only=cuda_only,
        min_left_s=timeout_s if optional else 0.0,
    )


def steps(check: Check, data: list[str]) -> list[Step]:
    """The check, cheapest and most telling first; the optional steps last, each run only when its
    whole timeout is left. The required ones fit the window: tests/test_gpu_check.py checks it."""
    nvml = [sys.executable, str(Path(__file__).resolve()), "--nvml-probe"]
    cuda_tests = [
        sys.executable,
        "-m",
        "pytest",
        str(ROOT / "tests" / "test_cuda.py"),
        "-q",
        "-rs",
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
    ]
    one_build = ["--builds", "1"]
    # On an H200 a first pair of matmul, elementwise and conv2d took 125 s (two builds one after the
    # other) and each later one 41 s: the session's own --budget starts no pair it cannot finish,
    # and ends with its verdict.
    ab_args = (
        ["--profile", "smoke", "--pairs", "3"]
        if check.dry_run
        else ["--budget", "160s", "--max-pairs", "6"]
    )
    return [
        Step(
            "nvml-probe",
            nvml,
            15,
            "own PID among compute processes, power average vs instantaneous, energy counter, "
            "throttle reasons",
            cuda_only=True,
        ),
        Step(
            "cuda-tests",
            cuda_tests,
            30,
            "tests/test_cuda.py: synced clock vs CUDA events, TF32 scoping, pinned "
            "copies, NVML energy",
        ),
        Step("env", gpubench("env", "--device", check.device), 10, "gpubench env: the fingerprint"),
        run_step(
            check,
            data,
            "smoke",
            "every workload but DDP once, at GPU sizes: each one's CUDA path runs",
            "smoke",
            80,
            "-m",
            "not distributed",
            *selection(None),
        ),
        run_step(
            check,
            data,
            "headline",
            "matmul per dtype, DRAM bandwidth, selfcheck, transfers pinned/pageable",
            "quick",
            70,
            *one_build,
            *selection(HEADLINE),
        ),
        run_step(
            check,
            data,
            "transformer",
            "GPT-2 small's eager training step (bf16, flash attention, fused AdamW): "
            "tokens/s and MFU",
            "quick",
            40,
            *one_build,
            *selection(GPT2_MFU),
        ),
        run_step(
            check,
            data,
            "epoch",
            "the MNIST epoch (template, preloaded, raced settings, DataLoader workers) and "
            "time to accuracy",
            "quick",
            100,
            *one_build,
            *selection(EPOCH),
        ),
        run_step(
            check,
            data,
            "attention",
            "scaled_dot_product_attention per backend in bf16 at 1k, 4k and 16k tokens",
            "quick",
            35,
            *one_build,
            *selection(ATTENTION),
        ),
        run_step(
            check,
            data,
            "ddp",
            "DDP, DataParallel and the collectives, alone (a hung launch ends with its share, "
            "its rank named)",
            "smoke",
            50,
            "-m",
            "distributed",
            *selection(None),
            optional=True,
        ),
        run_step(
            check,
            data,
            "compiled",
            "torch.compile: GPT-2 small, the epoch, CUDA graphs (reduce-overhead)",
            "full",
            150,
            *one_build,
            *selection(COMPILED),
            cuda_only=True,
            optional=True,
        ),
        Step(
            "ab",
            gpubench(
                "ab",
                "--device",
                check.device,
                *ab_args,
                "--results-dir",
                str(check.work / "ab"),
                *selection("matmul or elementwise"),
            ),
            185,
            "a paired A/A session: unchanged code against itself",
            min_left_s=185,
        ),
    ]


def skip_reason(check: Check, step: Step) -> str | None:
    if step.name in os.environ.get("GPU_CHECK_SKIP", "").split(","):
        return "skipped: named in GPU_CHECK_SKIP"
    if step.cuda_only and check.device != "cuda":
        return f"skipped: needs CUDA (this is a {check.device} dry run)"
    left_s = check.left_s()
    if left_s < max(step.min_left_s, 5.0):
        return (
            f"skipped: {left_s:.0f} s of the {BUDGET_S:.0f} s budget left, the step needs "
            f"{max(step.min_left_s, 5.0):.0f} s"
        )
    return None


def run_one(check: Check, number: int, step: Step) -> Outcome:
    """The step under `timeout` in its own process group, its output streamed to the terminal,
    the log and its own file."""
    reason = skip_reason(check, step)
    timeout_s = max(1, int(min(step.timeout_s, check.left_s())))
    check.say(f"\n=== step {number} {step.name} (timeout {timeout_s} s): {step.what}")
    if reason is not None:
        check.say(f"gpu-check: {step.name} {reason}")
        return Outcome(step.name, timeout_s, None, 0.0, reason)
    check.say("$ " + " ".join(step.argv))
    start_s = time.monotonic()
    env = dict(
        os.environ,
        PYTHONUNBUFFERED="1",
        GPUBENCH_DOWNLOAD="0",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    with open(check.work / "steps" / f"{number}-{step.name}.log", "w", encoding="utf-8") as own:
        proc = subprocess.Popen(
            ["timeout", "-k", str(KILL_AFTER_S), str(timeout_s), *step.argv],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            own.write(line)
            check.say(line.rstrip("\n"))
        code = proc.wait()
    wall_s = time.monotonic() - start_s
    note = "timed out" if code in (124, 137) else ("" if code == 0 else "failed")
    check.say(
        f"gpu-check: {step.name} exit code {code}, {wall_s:.1f} "
        f"s{' (' + note + ')' if note else ''}"
    )
    return Outcome(step.name, timeout_s, code, wall_s, note)


def fashion_source(given: Path | None) -> Path | None:
    """The first folder holding Fashion-MNIST's four .gz files (or the files themselves)."""
    for folder in ([given] if given else []) + list(FASHION_PLACES):
        if all((folder / f"{f}.gz").exists() or (folder / f).exists() for f in FASHION_FILES):
            return folder
    return None


def prepare_data(check: Check, given: Path | None, data_root: Path) -> list[str]:
    """--dataset/--data-root for every run: Fashion-MNIST put into `data_root` (a temporary folder:
    not packed, not left in OUT), or synthetic data when no copy was brought along (the `data`
    row of the summary then fails: time to accuracy was not measured)."""
    source = fashion_source(given)
    if source is None:
        places = ", ".join(str(p) for p in ([given] if given else []) + list(FASHION_PLACES))
        check.say(
            f"gpu-check: WARNING: no Fashion-MNIST in {places} — training runs on synthetic data, "
            "time to accuracy is skipped (bring the four .gz files along: see docs/gpu-check.md)"
        )
        check.outcomes.append(Outcome("data", 0, 1, 0.0, "no Fashion-MNIST: synthetic data"))
        return ["--dataset", "synthetic"]
    # torchvision's layout, which gpubench.harness.devices.datasets reads
    raw = data_root / "FashionMNIST" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    # decompressed here with the standard library: the driver never imports torch
    for name in FASHION_FILES:
        if (source / name).exists():
            shutil.copyfile(source / name, raw / name)
        else:
            with gzip.open(source / f"{name}.gz", "rb") as packed, open(raw / name, "wb") as plain:
                shutil.copyfileobj(packed, plain)
    check.say(f"gpu-check: Fashion-MNIST from {source}")
    check.outcomes.append(Outcome("data", 0, 0, 0.0, f"Fashion-MNIST from {source}"))
    return ["--dataset", "fashion-mnist", "--data-root", str(data_root)]


def summary(check: Check) -> str:
    rows = [f"{'step':<16} {'timeout_s':>9} {'exit':>5} {'wall_s':>7}  note"]
    for o in check.outcomes:
        rows.append(
            f"{o.name:<16} {o.timeout_s:>9.0f} {'-' if o.code is None else o.code:>5} "
            f"{o.wall_s:>7.1f}  {o.note}"
        )
    rows.append(
        f"{'total':<16} {BUDGET_S:>9.0f} {'':>5} {time.monotonic() - check.start_s:>7.1f}  budget "
        f"{BUDGET_S:.0f} s"
    )
    return "\n".join(rows)


def pack(check: Check, keep: bool) -> Path:
    """OUT/gpu-check.tar.gz of the work folder (the log copied in first); the folder goes unless
    kept."""
    shutil.copyfile(check.out / "gpu-check.log", check.work / "gpu-check.log")
    tar_path = check.out / "gpu-check.tar.gz"
    # renamed into place: a pack cut off leaves the last whole one
    partial = tar_path.with_name(tar_path.name + ".partial")
    with tarfile.open(partial, "w:gz") as tar:
        tar.add(check.work, arcname=check.work.name)
    os.replace(partial, tar_path)
    if not keep:
        shutil.rmtree(check.work)
    return tar_path


def nvml_probe() -> int:
    """Printed into the log: what the run's NVML columns will rest on, read while this process
    holds a CUDA context (so it must find its own PID among the compute processes)."""
    sys.path.insert(0, str(ROOT))
    import torch

    from gpubench.harness.devices.nvml_probe import load_nvml, nvml_index

    # a context: this process is now a compute process
    torch.ones(1, device="cuda")
    nvml = load_nvml()
    print("\n".join(nvml_report(nvml, nvml.nvmlDeviceGetHandleByIndex(nvml_index(0)), os.getpid())))
    return 0


def nvml_report(nvml: object, handle: object, own_pid: int) -> list[str]:
    """One line per question: own PID among the compute processes, power averaged vs
    instantaneous, the energy counter, the telemetry fields (throttle reasons among them)."""
    from gpubench.harness.devices.energy import nvml_counter
    from gpubench.harness.devices.nvml_probe import instant_power_w, probe_nvml, running_pids, why

    pids, note = running_pids(nvml, handle)
    if pids is None:
        lines = [f"compute processes: not answered; {note}"]
    else:
        found = (
            "found"
            if own_pid in pids
            else (
                "NOT found (a container hides pids: gpu_other_procs then counts this "
                "process as another)"
            )
        )
        lines = [f"compute processes: {sorted(pids)}; own pid {own_pid} {found}"]
    for name, read in (
        (
            "power average (nvmlDeviceGetPowerUsage)",
            lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
        ),
        ("power instantaneous (NVML_FI_DEV_POWER_INSTANT)", lambda: instant_power_w(nvml, handle)),
    ):
        try:
            lines.append(f"{name}: {read():.1f} W")
        except Exception as error:  # noqa: BLE001 - printed: the point of the probe
            lines.append(f"{name}: not answered ({why(error)})")
    counter, counter_note = nvml_counter(0, lambda: nvml)
    lines.append(
        "energy counter: "
        f"{f'{counter.read_j():.1f} J since the driver loaded' if counter else counter_note}"
    )
    probe = probe_nvml(nvml, handle)
    lines.append(
        f"telemetry fields: {sorted(probe.readers)}; power {probe.power or 'none'}; "
        f"{probe.note or 'nothing missing'}"
    )
    lines.append(f"one reading: {probe.sample()}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "out", type=Path, nargs="?", help="folder for gpu-check.tar.gz and gpu-check.log"
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="every step on cpu (smoke-sized), the CUDA-only ones skipped",
    )
    parser.add_argument(
        "--fashion-dir",
        type=Path,
        default=None,
        help="a folder with Fashion-MNIST's four .gz files",
    )
    parser.add_argument("--keep", action="store_true", help="keep OUT/gpu-check/ after packing it")
    parser.add_argument("--nvml-probe", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.nvml_probe:
        return nvml_probe()
    if args.out is None:
        parser.error("OUT is required: the folder the packed results and the log go into")
    return run_check(args)


def run_check(args: argparse.Namespace) -> int:
    # the budget counts from here: the CUDA probe below is part of the window
    start_s = time.monotonic()
    if shutil.which("timeout") is None:
        sys.exit(
            "gpu-check: coreutils `timeout` is not on PATH — install coreutils (every step runs "
            "under it)"
        )
    out = args.out.resolve()
    work = out / "gpu-check"
    if work.exists() or (out / "gpu-check.tar.gz").exists():
        sys.exit(
            f"gpu-check: {out} already holds a check: give a new folder (nothing there was touched)"
        )
    (work / "steps").mkdir(parents=True)
    device = "cpu" if args.dry_run else "cuda"
    if not args.dry_run and not cuda_available():
        sys.exit(
            "gpu-check: torch.cuda.is_available() is False — run this on a CUDA machine, or use "
            "--dry-run"
        )
    with open(out / "gpu-check.log", "w", encoding="utf-8") as log:
        check = Check(out, work, device, args.dry_run, log, start_s)
        check.say(
            f"gpu-check: device {device}{' (dry run)' if args.dry_run else ''}, budget "
            f"{BUDGET_S:.0f} s, into {work}"
        )
        with tempfile.TemporaryDirectory(prefix="gpu-check-data-") as data_root:
            data = prepare_data(check, args.fashion_dir, Path(data_root))
            for number, step in enumerate(steps(check, data)):
                check.outcomes.append(run_one(check, number, step))
                # what is measured so far, should the whole check be cut off
                pack(check, keep=True)
        table = summary(check)
        (work / "summary.txt").write_text(table + "\n", encoding="utf-8")
        check.say("\n=== summary\n" + table)
    tar_path = pack(check, args.keep)
    print(
        f"gpu-check: packed {tar_path} and {out / 'gpu-check.log'}; build the report elsewhere: "
        f"tar xzf gpu-check.tar.gz && gpubench report gpu-check/results --out report/",
        flush=True,
    )
    return 0 if all(o.code in (None, 0) for o in check.outcomes) else 1


def cuda_available() -> bool:
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)",
        ],
        timeout=120,
        check=False,
    )
    return probe.returncode == 0


if __name__ == "__main__":
    sys.exit(main())
