"""The user's own model (`gpubench run --model module:factory --input SHAPE`): its training step and
inference over the suite's settings, samples/s and peak memory."""

from gpubench.harness.core.columns import Column
from gpubench.harness.core.workload_spec import (
    IdRule,
    PlotSpec,
    ReportSection,
    SummaryFigure,
    WorkloadSpec,
)

SPEC = WorkloadSpec(
    name="model",
    id_rule=IdRule(
        (
            "model",
            "input_shape",
            "step",
            "precision",
            "compile_mode",
            "channels_last",
            "checkpointing",
            "batch_size",
        ),
        defaults={"precision": "fp32", "compile_mode": "none", "checkpointing": False},
        always=frozenset({"channels_last"}),
    ),
    markers=("training",),
    headlines=(("samples_per_s", "{:.4g} samples/s"),),
    columns=(
        # model: train (forward, backward, optimizer step) or inference
        Column("step", "str", "case"),
        # model: one sample's shape, as --input gives it (3x64x64)
        Column("input_shape", "str", "case"),
        Column("n_params", "int", "figure"),
    ),
    report=ReportSection(
        "Your model (--model)",
        intro="The model `gpubench run --model module:factory --input SHAPE` built: its training "
        "step (forward, MSE loss to a fixed target, backward, AdamW step) and its inference "
        "(forward under inference_mode), one setting at a time around fp32 eager; medians over "
        "builds, `spread` between builds.",
        table=(
            "machine",
            "model",
            "input_shape",
            "step",
            "precision",
            "compile_mode",
            "channels_last",
            "checkpointing",
            "batch_size",
            "samples_per_s",
            "peak_mem_bytes",
            "spread",
            "flags",
        ),
        plot=PlotSpec(
            x="batch_size",
            y="samples_per_s",
            hue=("step", "precision"),
            panels=("model",),
            logy=True,
        ),
        order=130,
    ),
    summary=(
        SummaryFigure(
            "your model's training step, fastest",
            "samples_per_s",
            "{samples_per_s:.4g} samples/s ({setting})",
            {"step": "train"},
        ),
    ),
)
