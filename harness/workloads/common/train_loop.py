"""The training step and epoch every training workload shares. No per-step host sync: loss and
correct counts stay on the device and are read once at the end, so the loop measures the settings,
not `.item()` stalls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
import functools
import os
import time
from collections.abc import Callable, Iterable, Iterator

import torch
from torch import nn

from gpubench.harness.measurement.timing import Stopwatch, SyncedClock

PRECISIONS = ("fp32", "fp16", "bf16")
COMPILE_MODES = ("none", "default", "reduce-overhead", "max-autotune")
AMP_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}

Batch = tuple[torch.Tensor, torch.Tensor]


def compile_skip_reason(compile_mode: str) -> str | None:
    """Why a compiled case cannot be what its label says (compiling switched off would silently run
    eager)."""
    if compile_mode == "none":
        return None
    if not hasattr(torch, "compile"):
        return "torch.compile is not available in this PyTorch"
    import torch._dynamo.config as dynamo_config

    if getattr(dynamo_config, "disable", False) or os.environ.get(
        "TORCH_COMPILE_DISABLE", "0"
    ) not in ("", "0"):
        return (
            "torch.compile is switched off here (TORCH_COMPILE_DISABLE or TORCHDYNAMO_DISABLE): "
            "it would run eager — unset it"
        )
    cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR", "")
    # else a failed row with 300 lines of InductorError that never name it
    if cache and not can_create_in(cache):
        return (
            f"TORCHINDUCTOR_CACHE_DIR={cache} cannot be written: torch.compile keeps its kernels "
            "there — point it at a folder you can write"
        )
    return None


def can_create_in(folder: str) -> bool:
    """`folder` can be written, or made: its nearest existing ancestor takes new entries."""
    path = os.path.abspath(folder)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)


# an emulated fp16 matmul of this size takes tens of milliseconds, a native one far less
CPU_PROBE_N = 256


@functools.cache
def cpu_matmul_ms(dtype: torch.dtype, n: int = CPU_PROBE_N) -> float:
    """One n×n matmul on this CPU, after one call to warm it: the figures the fp16 skip reason
    states."""
    a = torch.ones(n, n, dtype=dtype)
    torch.matmul(a, a)
    start_s = time.perf_counter()
    torch.matmul(a, a)
    return 1e3 * (time.perf_counter() - start_s)


def precision_skip_reason(precision: str, device: torch.device) -> str | None:
    if precision == "fp16" and device.type == "cpu":
        fp16_ms, fp32_ms = cpu_matmul_ms(torch.float16), cpu_matmul_ms(torch.float32)
        return (
            f"fp16 on cpu has no fast kernels (an n={CPU_PROBE_N} fp16 matmul took {fp16_ms:.3g} "
            f"ms against {fp32_ms:.3g} ms in fp32 here, measured now): use bf16 on cpu"
        )
    if precision == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return "bf16 is not supported by this GPU"
    return None


def autocast(device: torch.device, precision: str) -> Any:
    """fp16 and bf16 autocast; fp32 runs as it is."""
    return torch.autocast(
        device.type, dtype=AMP_DTYPES.get(precision, torch.float32), enabled=precision in AMP_DTYPES
    )


class Trainer:
    """One model, optimizer and precision: fp16 is autocast + GradScaler, bf16 autocast alone
    (fp32's exponent)."""

    def __init__(
        self,
        model: nn.Module,
        device: torch.device,
        precision: str = "fp32",
        accumulation_steps: int = 1,
        freeze_features: bool = False,
        compile_mode: str = "none",
        lr: float = 1e-3,
        channels_last: bool = False,
        *,
        clock: SyncedClock,
    ) -> None:
        self.device = device
        # the session's: every figure of a run is timed with one clock
        self.clock = clock
        # channels_last (NHWC) lets oneDNN / cuDNN pick their fastest convolution kernels.
        self.memory_format = torch.channels_last if channels_last else torch.contiguous_format
        self.model = model.to(device, memory_format=self.memory_format)
        self.precision, self.accumulation_steps = precision, accumulation_steps
        if freeze_features:
            for param in model.features.parameters():
                param.requires_grad_(False)
        self.optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
        self.criterion = nn.CrossEntropyLoss()
        self.scaler = torch.amp.GradScaler(device.type) if precision == "fp16" else None
        self.forward: Callable[[torch.Tensor], torch.Tensor] = (
            model if compile_mode == "none" else torch.compile(model, mode=compile_mode)
        )
        self.loss_sum = torch.zeros((), device=device)
        self.seen = 0
        # micro-batches since the last optimizer step
        self._pending = 0

    def autocast(self) -> Any:
        return autocast(self.device, self.precision)

    def micro_step(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Forward and backward of one micro-batch, the loss divided so N micro-batches of B give a
        batch of N·B."""
        self.model.train()
        x = x.contiguous(memory_format=self.memory_format)
        with self.autocast():
            loss = self.criterion(self.forward(x), y)
        scaled = loss / self.accumulation_steps
        (self.scaler.scale(scaled) if self.scaler else scaled).backward()
        self.loss_sum += loss.detach().float() * x.shape[0]
        self.seen += x.shape[0]
        self._pending += 1
        if self._pending == self.accumulation_steps:
            self.optimizer_step()

    def optimizer_step(self) -> None:
        if self._pending == 0:
            return
        apply_step(self.optimizer, self.scaler)
        self._pending = 0

    def step(self, micro_batches: Iterable[Batch]) -> None:
        for x, y in micro_batches:
            self.micro_step(x, y)
        self.optimizer_step()

    @torch.no_grad()
    def evaluate(
        self, batches: Iterable[Batch], non_blocking: bool = False
    ) -> tuple[torch.Tensor, int]:
        """Correct predictions (a device tensor) and the number of samples."""
        self.model.eval()
        correct = torch.zeros((), dtype=torch.long, device=self.device)
        total = 0
        for x, y in batches:
            x, y = (
                x.to(self.device, non_blocking=non_blocking),
                y.to(self.device, non_blocking=non_blocking),
            )
            x = x.contiguous(memory_format=self.memory_format)
            with self.autocast():
                correct += (self.forward(x).argmax(1) == y).sum()
            total += y.shape[0]
        return correct, total


@dataclass(frozen=True)
class EpochResult:
    train_s: float
    eval_s: float
    # micro-batches trained
    steps: int
    samples: int
    data_wait_s: float
    train_loss: float
    test_accuracy: float
    # seconds per step in each window of steps (the epoch's spread)
    window_step_s: list[float]

    @property
    def epoch_s(self) -> float:
        return self.train_s + self.eval_s

    @property
    def data_wait_frac(self) -> float:
        return self.data_wait_s / self.train_s if self.train_s > 0 else 0.0


def timed_batches(
    batches: Iterable[Batch],
    device: torch.device,
    non_blocking: bool,
    wait: Stopwatch | None = None,
) -> Iterator[Batch]:
    """Device batches, the time getting each (next() and the copy call) charged to `wait`. Host
    clock, no sync: a device still busy with the previous step is not data wait."""
    iterator = iter(batches)
    while True:
        if wait:
            wait.start(sync=False)
        try:
            x, y = next(iterator)
        except StopIteration:
            if wait:
                wait.stop(sync=False)
            return
        x, y = x.to(device, non_blocking=non_blocking), y.to(device, non_blocking=non_blocking)
        if wait:
            wait.stop(sync=False)
        yield x, y


# an epoch is timed in this many windows of steps: its samples and its spread
EPOCH_WINDOWS = 10


def run_epoch(
    trainer: Trainer,
    train: Iterable[Batch],
    test: Iterable[Batch],
    non_blocking: bool,
    progress: Callable[[int, int], None] | None = None,
) -> EpochResult:
    """Every training batch, then every test batch; synchronized only at the edges of windows of
    steps (a tenth of the epoch), whose seconds per step are the samples. train_s also holds the
    loader's start and shutdown. `progress(done, total)` is called at each window edge (total 0:
    unknown)."""
    trainer.loss_sum.zero_()
    trainer.seen, clock = 0, trainer.clock
    wait = Stopwatch(clock)
    total = len(train) if hasattr(train, "__len__") else 0  # type: ignore[arg-type]
    per_window = max(1, total // EPOCH_WINDOWS) if total else 50
    windows: list[float] = []
    start = window_start = clock()
    steps = closed = 0
    for x, y in timed_batches(train, trainer.device, non_blocking, wait):
        trainer.micro_step(x, y)
        steps += 1
        # EPOCH_WINDOWS - 1 windows of per_window steps; the last window takes the rest
        if steps - closed == per_window and (not total or len(windows) < EPOCH_WINDOWS - 1):
            now = clock()
            windows.append((now - window_start) / per_window)
            window_start, closed = now, steps
            if progress:
                progress(steps, total)
    # a last partial accumulation group still updates the model
    trainer.optimizer_step()
    trained = clock()
    if steps > closed:
        windows.append((trained - window_start) / (steps - closed))
    correct, count = trainer.evaluate(test, non_blocking)
    accuracy = correct.item() / max(count, 1)
    done = clock()
    return EpochResult(
        trained - start,
        done - trained,
        steps,
        trainer.seen,
        wait.total_s,
        trainer.loss_sum.item() / max(trainer.seen, 1),
        accuracy,
        windows,
    )


def profile_top_ops(
    step: Callable[[], None], device: torch.device, steps: int = 10, top: int = 15
) -> list[dict[str, Any]]:
    """The top operators of a few profiled steps, by device time (self CPU time on cpu)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize() if device.type == "cuda" else None

    def device_time_us(event: Any) -> float:
        return float(
            getattr(event, "device_time_total", 0.0)
            or getattr(event, "cuda_time_total", 0.0)
            or 0.0
        )

    key = device_time_us if device.type == "cuda" else (lambda e: float(e.self_cpu_time_total))
    return [
        {
            "op": e.key,
            "device_time_us": device_time_us(e),
            "self_cpu_time_us": float(e.self_cpu_time_total),
            "cpu_time_us": float(e.cpu_time_total),
            "calls": int(e.count),
        }
        for e in sorted(prof.key_averages(), key=key, reverse=True)[:top]
    ]


def apply_step(optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler | None) -> None:
    """One optimizer step (through the fp16 scaler where there is one), then the gradients
    cleared."""
    if scaler:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
