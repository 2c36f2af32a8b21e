import math
from collections.abc import Mapping
from typing import Any

from gpubench.harness.core.columns import Column
from gpubench.harness.core.workload_spec import (
    IdRule,
    PlotSpec,
    ReportSection,
    SummaryFigure,
    WorkloadSpec,
)


def _best_case(best: Mapping[str, Any]) -> str:
    """A summary cell: the share is of the attention build's own matmul in that dtype, named with
    its figure, never to be read against the summary's matmul row (another case, another build)."""
    own = best.get("measured_peak_tflops")
    of = (
        f"of its build's {best['dtype']} matmul ({own:.3g} TFLOP/s)"
        if isinstance(own, float) and math.isfinite(own)
        else "of matmul"
    )
    return (
        f"{best['tflops']:.3g} TFLOP/s, {best['pct_of_measured_peak']:.0f}% {of} "
        f"({best['dtype']} {best['sdpa_backend']} s{best['seq_len']:.0f})"
    )


SPEC = WorkloadSpec(
    name="attention",
    id_rule=IdRule(
        ("dtype", "op", "sdpa_backend", "causal", "seq_len", "batch_size", "heads", "head_dim"),
        always=frozenset({"causal"}),
    ),
    headlines=(("tflops", "{:.3g} TFLOP/s"), ("pct_of_measured_peak", "{:.0f}% of matmul")),
    columns=(
        Column("seq_len", "int", "case"),
        # math, flash, efficient, cudnn (torch.nn.attention.SDPBackend)
        Column("sdpa_backend", "str", "case"),
        Column("causal", "bool", "case"),
        Column("heads", "int", "case"),
        Column("head_dim", "int", "case"),
        # this build's own matmul in the case's dtype
        Column("measured_peak_tflops", "float", "figure", "TFLOP/s"),
        # the size n of that n×n matmul
        Column("measured_peak_n", "int", "figure"),
        # tflops / measured_peak_tflops
        Column("pct_of_measured_peak", "float", "figure", "%"),
    ),
    summary=(
        SummaryFigure("attention forward, best", "tflops", _best_case, {"op": "fwd"}),
        SummaryFigure("attention fwd+bwd, best", "tflops", _best_case, {"op": "fwd_bwd"}),
    ),
    report=ReportSection(
        "Attention (scaled_dot_product_attention)",
        intro="`F.scaled_dot_product_attention` per backend (`torch.nn.attention.sdpa_kernel`), "
        "forward (`fwd`) and forward+backward (`fwd_bwd`), causal and not, over sequence lengths "
        "at a constant number of tokens per call. TFLOP/s count 4·B·H·S²·D per forward (halved "
        "when causal) and 2.5× that for the backward, as flash-attention's benchmark does; "
        "`pct_of_measured_peak` is against this machine's own n×n matmul in the same dtype, "
        "measured in the same build with the same clock (`measured_peak_n`). Above 100% the "
        "kernel computes faster than `torch.matmul` in that dtype (a CPU that emulates bf16 "
        "matmul). A backend the device cannot run is a skipped row (Rows not ok) with torch's "
        "reason.",
        table=(
            "machine",
            "dtype",
            "op",
            "sdpa_backend",
            "causal",
            "seq_len",
            "batch_size",
            "tflops",
            "pct_of_measured_peak",
            "measured_peak_tflops",
            "spread",
            "flags",
        ),
        plot=PlotSpec(
            x="seq_len",
            y="pct_of_measured_peak",
            hue=("sdpa_backend", "causal"),
            panels=("dtype", "op"),
            logx=True,
            logy=True,
        ),
        order=47,
    ),
)
