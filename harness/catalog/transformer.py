import math
from collections.abc import Mapping
from typing import Any

from gpubench.harness.core.columns import Column
from gpubench.harness.core.percent import percent
from gpubench.harness.core.workload_spec import (
    IdRule,
    PlotSpec,
    ReportSection,
    SummaryFigure,
    WorkloadSpec,
)


def _training(best: Mapping[str, Any]) -> str:
    """Tokens/s of the fastest setting and its MFU, against the datasheet peak or else the measured
    matmul."""
    mfu, datasheet = best.get("mfu"), best.get("peak_tflops")
    own = best.get("measured_peak_tflops")
    of = (
        ""
        if isinstance(datasheet, float) and math.isfinite(datasheet)
        else f" of its build's {best['precision']} matmul ({own:.3g} TFLOP/s)"
        if isinstance(own, float) and math.isfinite(own)
        else " of measured matmul"
    )
    # 0.04%, not 0%
    share = f", MFU {percent(mfu)}{of}" if isinstance(mfu, float) and math.isfinite(mfu) else ""
    return f"{best['tokens_per_s']:.3g} tokens/s ({best['setting']}){share}"


SPEC = WorkloadSpec(
    name="transformer",
    id_rule=IdRule(
        ("model", "precision", "compile_mode", "sdpa_backend", "optimizer"),
        defaults={"compile_mode": "none", "optimizer": "adamw"},
        always=frozenset({"model", "precision", "sdpa_backend"}),
    ),
    # each sample is a training step already
    builds={"smoke": 1, "quick": 2, "full": 5},
    markers=("training",),
    headlines=(
        ("tokens_per_s", "{:.4g} tokens/s"),
        ("tflops", "{:.3g} model TFLOP/s"),
        ("mfu", "MFU {:.1%}"),
    ),
    columns=(
        # tokens per sequence (the model's context)
        Column("seq_len", "int", "case"),
        # math, flash, efficient, cudnn (torch.nn.attention.SDPBackend)
        Column("sdpa_backend", "str", "case"),
        # adamw (torch's default implementation) or adamw-fused
        Column("optimizer", "str", "case"),
        # N of the FLOP count: every parameter but the position embedding
        Column("n_params", "int", "figure"),
        Column("tokens_per_s", "float", "figure", "tokens/s"),
        # model FLOP/s / the datasheet peak, else / measured_peak_tflops
        Column("mfu", "float", "figure", "frac"),
        # this build's own matmul in the case's precision
        Column("measured_peak_tflops", "float", "figure", "TFLOP/s"),
        # the size n of that n×n matmul
        Column("measured_peak_n", "int", "figure"),
    ),
    report=ReportSection(
        "Transformer training step (GPT-style decoder)",
        intro="One AdamW training step of a GPT-style decoder (nanoGPT's shape: pre-LayerNorm "
        "blocks, causal scaled_dot_product_attention, tied output head) on a learnable synthetic "
        "token stream; a step whose loss does not fall over the timed steps is a failed row. "
        "`tflops` counts the model's FLOPs, 6·N + 12·L·H·Q·T per token (PaLM appendix B); `mfu` "
        "divides them by the datasheet peak in the case's precision or, where gpubench knows no "
        "peak (CPUs), by this machine's own n×n matmul in that precision, measured in the same "
        "build (`measured_peak_tflops`). Medians over builds; `spread` between builds.",
        table=(
            "machine",
            "model",
            "precision",
            "compile_mode",
            "sdpa_backend",
            "optimizer",
            "batch_size",
            "seq_len",
            "tokens_per_s",
            "step_s",
            "spread",
            "tflops",
            "mfu",
            "measured_peak_tflops",
            "peak_mem_bytes",
            "flags",
        ),
        plot=PlotSpec(x="setting", y="tokens_per_s", hue="model", logy=True, bars=True),
        order=65,
    ),
    summary=(
        SummaryFigure(
            "tiny transformer step, fastest", "tokens_per_s", _training, {"model": "tiny"}
        ),
        SummaryFigure("gpt2-125m step, fastest", "tokens_per_s", _training, {"model": "gpt2-125m"}),
    ),
)
