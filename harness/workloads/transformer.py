"""A GPT-style decoder's training step: tokens/s, step time, peak memory and MFU (as nanoGPT and
PaLM report it). Losses stay on the device and are read once after the rounds: one not finite, or no
lower when the first timed batch comes round again, fails the row."""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import torch
from torch.nn.attention import sdpa_kernel
from torch.profiler import ProfilerActivity, profile

from gpubench.harness.devices import device as devices
from gpubench.harness.measurement.cases import Case, CaseSkipped, Diverged
from gpubench.harness.catalog.transformer import SPEC
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.measurement.measure import Measurement, Timed
from gpubench.harness.measurement.terminal import torch_said
from gpubench.harness.core.peaks import peak_tflops
from gpubench.harness.core.plan import RoundPlan
from gpubench.harness.core.stats import SampleStats
from gpubench.harness.budget.cost_model import Work
from gpubench.harness.measurement.workload import Workload
from gpubench.harness.workloads.common.gpt import (
    CONFIGS,
    GPT,
    SDPA_BACKENDS,
    GPTConfig,
    counted_params,
    flops_per_token,
    token_batches,
)
from gpubench.harness.workloads.common.matmul_peak import measured_peak
from gpubench.harness.workloads.common.matmuls import device_name, with_precision
from gpubench.harness.workloads.common.train_loop import (
    AMP_DTYPES,
    autocast,
    compile_skip_reason,
    precision_skip_reason,
)

PRECISIONS = ("fp32", "bf16")
# distinct batches the steps cycle through
BATCH_POOL = 4
# The attention kernels (as the profiler names them) that show which fused backend ran; math runs as
# matmuls.
FUSED_KERNELS: dict[str, tuple[str, ...]] = {
    "flash": (
        "aten::_scaled_dot_product_flash_attention",
        "aten::_scaled_dot_product_flash_attention_for_cpu",
    ),
    "efficient": ("aten::_scaled_dot_product_efficient_attention",),
    "cudnn": ("aten::_scaled_dot_product_cudnn_attention",),
}
# Warm-up (compilation, allocator growth) and timed steps: one more than a multiple of the pool, so
# the last trains on the first's batch. quick: 13 timed steps, where the IQR of 5 flagged seven rows
# in eight noisy on a 2-core CPU
STEPS: dict[str, tuple[int, int]] = {"smoke": (2, 5), "quick": (2, 13), "full": (3, 21)}


@dataclass(frozen=True)
class TransformerCase(Case):
    workload: ClassVar[str] = "transformer"
    # a name in gpt.CONFIGS
    model: str
    precision: str
    compile_mode: str
    sdpa_backend: str
    # adamw: torch's default implementation (foreach on CUDA); adamw-fused: fused=True
    optimizer: str
    batch_size: int
    seq_len: int

    @property
    def config(self) -> GPTConfig:
        return CONFIGS[self.model]


def base_case(
    model: str, precision: str, backend: str, optimizer: str = "adamw"
) -> TransformerCase:
    config = CONFIGS[model]
    return TransformerCase(
        model, precision, "none", backend, optimizer, config.batch_size, config.seq_len
    )


def sweep(base: TransformerCase, compiled: bool) -> list[TransformerCase]:
    """One setting at a time around `base` (torch.compile only with `compiled`)."""
    other_optimizer = "adamw" if base.optimizer == "adamw-fused" else "adamw-fused"
    cases = [base] + [replace(base, precision=p) for p in PRECISIONS if p != base.precision]
    cases += [replace(base, sdpa_backend=b) for b in SDPA_BACKENDS if b != base.sdpa_backend]
    cases += [replace(base, optimizer=other_optimizer)]
    return cases + ([replace(base, compile_mode="default")] if compiled else [])


def cases(ctx: BuildContext) -> list[TransformerCase]:
    """The CPU runs `tiny` (a cold compile takes 20 s to 2 minutes on 2 cores: not in quick); a GPU
    adds GPT-2 small in bf16 with flash and fused AdamW, plus fp32 with the backends that run it;
    `small` joins the full profile."""
    profile, tiny = str(ctx.profile), base_case("tiny", "fp32", "math")
    if ctx.device.type == "cpu":
        small = (
            sweep(base_case("small", "fp32", "math"), compiled=False) if profile == "full" else []
        )
        return sweep(tiny, compiled=profile != "quick") + small
    # the GPU check's smoke step has no room for a cold compile
    if profile == "smoke":
        return sweep(tiny, compiled=False)
    gpt2 = base_case("gpt2-125m", "bf16", "flash", "adamw-fused")
    fp32 = [replace(gpt2, precision="fp32", sdpa_backend=b) for b in ("math", "efficient", "cudnn")]
    large = sweep(gpt2, compiled=True) + fp32
    small = (
        sweep(base_case("small", "bf16", "flash", "adamw-fused"), compiled=True)
        if profile == "full"
        else []
    )
    return list(dict.fromkeys(sweep(tiny, compiled=True) + small + large))


def backend_skip_reason(case: TransformerCase, device: torch.device) -> str | None:
    """Why this backend cannot run the case, from one causal forward and backward on q, k, v laid
    out as the model passes them (strided views of one qkv: a kernel may refuse these), with torch's
    warnings as the reason."""
    config, dtype = case.config, AMP_DTYPES.get(case.precision, torch.float32)
    width = config.n_head * config.head_dim
    qkv = torch.randn(1, config.seq_len, 3 * width, device=device, dtype=dtype, requires_grad=True)
    shape = (1, config.seq_len, config.n_head, config.head_dim)
    # as gpt.CausalSelfAttention
    q, k, v = (t.view(shape).transpose(1, 2) for t in qkv.split(width, dim=2))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            with torch.nn.attention.sdpa_kernel(SDPA_BACKENDS[case.sdpa_backend]):
                torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, is_causal=True
                ).sum().backward()
            devices.synchronize(device)
        except RuntimeError as error:
            why = list(dict.fromkeys(torch_said(str(w.message).split("\n")[0]) for w in seen)) or [
                str(error).split(". ")[0]
            ]
            what = (
                f"sdpa backend {case.sdpa_backend} cannot run {case.precision} attention on "
                f"{device.type}"
            )
            return f"{what}: {'; '.join(why)}"
    return None


def optimizer_for(case: TransformerCase, model: torch.nn.Module) -> torch.optim.Optimizer:
    """nanoGPT's AdamW (betas 0.9/0.95, weight decay 0.1); fused=True for adamw-fused."""
    fused = True if case.optimizer == "adamw-fused" else None
    return torch.optim.AdamW(
        model.parameters(), lr=case.config.lr, betas=(0.9, 0.95), weight_decay=0.1, fused=fused
    )


def fused_skip_reason(case: TransformerCase, device: torch.device) -> str | None:
    """Why AdamW(fused=True) cannot run here, found by one step on a tiny parameter."""
    if case.optimizer != "adamw-fused":
        return None
    param = torch.nn.Parameter(torch.zeros(4, device=device))
    param.grad = torch.ones_like(param)
    try:
        torch.optim.AdamW([param], fused=True).step()
    except RuntimeError as error:
        return (
            f"AdamW(fused=True) is not supported on {device.type} by this torch: "
            f"{str(error).splitlines()[0]}"
        )
    return None


def skip_reason(case: TransformerCase, device: torch.device) -> str | None:
    return (
        compile_skip_reason(case.compile_mode)
        or precision_skip_reason(case.precision, device)
        or backend_skip_reason(case, device)
        or fused_skip_reason(case, device)
    )


class TransformerStep:
    """One AdamW step on the next batch of the pool; the loss stays on the device in `losses`."""

    def __init__(self, case: TransformerCase, device: torch.device, seed: int = 0) -> None:
        self.backend = SDPA_BACKENDS[case.sdpa_backend]
        self.model = GPT(case.config, self.backend, seed).to(device)
        self.optimizer = optimizer_for(case, self.model)
        self.forward: Callable[..., torch.Tensor] = (
            self.model
            if case.compile_mode == "none"
            else torch.compile(self.model, mode=case.compile_mode)
        )
        self.batches = token_batches(case.config, device, BATCH_POOL, seed)
        self.autocast = functools.partial(autocast, device, case.precision)
        self.losses: list[torch.Tensor] = []

    def __call__(self) -> torch.Tensor:
        tokens, targets = self.batches[len(self.losses) % len(self.batches)]
        # Also around the call, not only inside the model: torch.compile traces the kernel choice
        # from the process's flags and would otherwise pick its own (flash for a math case on a
        # CPU).
        with sdpa_kernel(self.backend), self.autocast():
            loss = self.forward(tokens, targets)
            loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.losses.append(loss.detach())
        return loss


def loss_check(losses: list[float], period: int = BATCH_POOL, capped: bool = False) -> str | None:
    """Why these steps did not train: a loss not finite, or the first batch's loss not lower the
    last time it comes round (the same batch, so no pass on an easier one). Steps `capped` by a
    budget too few for that: finite only."""
    if not all(math.isfinite(x) for x in losses):
        return f"the loss is not finite ({', '.join(f'{x:.4g}' for x in losses)})"
    again = (len(losses) - 1) // period * period
    if again == 0 and capped:
        return None
    if again == 0:
        return (
            f"{len(losses)} timed step(s): the first step's batch never came round again "
            f"({period} batches)"
        )
    if losses[again] >= losses[0]:
        return (
            f"the loss did not fall over {again} timed steps on the same batch "
            f"({losses[0]:.4g} -> {losses[again]:.4g})"
        )
    return None


def model_figures(
    case: TransformerCase, params: int, median_s: float, device_name: str
) -> dict[str, Any]:
    """MFU only where the device's peak is known."""
    config = case.config
    per_token = flops_per_token(
        params, config.n_layer, config.n_head, config.head_dim, config.seq_len
    )
    tflops = per_token * config.tokens_per_step / median_s / 1e12
    peak = peak_tflops(device_name, case.precision) if device_name else None
    return {
        "n_params": params,
        "tokens_per_s": config.tokens_per_step / median_s,
        "samples_per_s": config.batch_size / median_s,
        "step_s": median_s,
        "tflops": tflops,
        "peak_tflops": peak,
        "mfu": tflops / peak if peak else None,
    }


def step_figures(
    case: TransformerCase, step: TransformerStep, device_name: str, planned_steps: int
) -> Callable[[SampleStats, Any], dict[str, Any]]:
    def figures(stats: SampleStats, _result: Any) -> dict[str, Any]:
        # the one read of the losses
        timed = torch.stack(step.losses[: stats.rounds]).float().cpu().tolist()
        columns = model_figures(case, counted_params(step.model), stats.median_s, device_name)
        columns["train_loss"] = timed[-1] if timed else None
        if why := loss_check(timed, capped=stats.rounds < planned_steps):
            raise Diverged(
                why, {"train_loss": columns["train_loss"], "n_params": columns["n_params"]}
            )
        # an MFU above 1 (datasheet or measured reference) the runner flags impossible
        return columns

    return figures


def attention_mismatch(case: TransformerCase, step: TransformerStep) -> str | None:
    """Why the step did not run its backend, from the kernels of one profiled step (a fused backend
    has its own)."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    names = {event.key for event in prof.key_averages()}
    ran = {backend for backend, kernels in FUSED_KERNELS.items() if names.intersection(kernels)}
    if ran == ({case.sdpa_backend} & set(FUSED_KERNELS)):
        return None
    how = "compiled" if case.compile_mode != "none" else "eager"
    ran_text = ", ".join(sorted(ran)) or "math"
    return (
        f"the {how} step ran {ran_text} attention, not {case.sdpa_backend}: the setting did not "
        "hold"
    )


def set_up(case: TransformerCase, ctx: BuildContext) -> Timed:
    if reason := skip_reason(case, ctx.device):
        raise CaseSkipped(reason)
    # IEEE fp32 (no TF32): fp32's peak is the one that applies
    restore = with_precision("fp32")
    try:
        step = TransformerStep(case, ctx.device, seed=ctx.build_index)
        warmup, timed_steps = STEPS[str(ctx.profile)]
        # compiles and grows the allocator, outside the samples
        for _ in range(warmup - 1):
            step()
        # the last warm-up step
        if mismatch := attention_mismatch(case, step):
            raise CaseSkipped(mismatch)
        # the timed steps' losses are the first ones from here
        step.losses.clear()
    except BaseException:
        restore()
        raise
    name = device_name(ctx.device)
    no_datasheet = peak_tflops(name, case.precision) is None if name else True
    return Timed(
        fn=step,
        figures=step_figures(case, step, name, timed_steps),
        plan=RoundPlan(0, 1, timed_steps, 0.0),
        cleanup=restore,
        cpu_memory=step,
        companion=measured_mfu(case, ctx, step) if no_datasheet else None,
    )


def measured_mfu(
    case: TransformerCase, ctx: BuildContext, step: TransformerStep
) -> Callable[[Measurement], dict[str, Any]]:
    """On a device with no datasheet peak: MFU against this build's own matmul in the case's
    precision."""

    def companion(measured: Measurement) -> dict[str, Any]:
        peak = measured_peak(case.precision, ctx)
        tflops = model_figures(case, counted_params(step.model), measured.stats.median_s, "")[
            "tflops"
        ]
        return {
            "measured_peak_tflops": peak.tflops,
            "measured_peak_n": peak.n,
            "mfu": tflops / peak.tflops,
        }

    return companion


def headline(cases: list[TransformerCase]) -> list[TransformerCase]:
    """Each model's first case, its base setting: the summary's step rows."""
    return list({c.model: c for c in reversed(cases)}.values())[::-1]


# The share of the probed matmul rate a training step reaches (tiny on a CPU, GPT-2 on a GPU:
# 0.2-0.4); a cold torch.compile of the step takes 20 s to 2 minutes on a 2-core CPU, 30-60 s on a
# GPU host.
TRANSFORMER_EFFICIENCY = 0.25
COLD_COMPILE_S = 60.0


def work(case: TransformerCase, ctx: BuildContext) -> Work:
    config = case.config
    params = (
        12 * config.n_layer * config.d_model**2
        + (config.vocab_size + config.seq_len) * config.d_model
    )
    warmup, timed = STEPS[str(ctx.profile)]
    tokens = case.batch_size * case.seq_len
    return Work(
        flops=tokens
        * flops_per_token(params, config.n_layer, config.n_head, config.head_dim, case.seq_len),
        dtype=case.precision,
        efficiency=TRANSFORMER_EFFICIENCY,
        launches=30 * config.n_layer,
        setup_s=COLD_COMPILE_S if case.compile_mode != "none" else 0.0,
        calls=warmup + timed,
    )


WORKLOAD = Workload(SPEC, cases, set_up, headline, work)
