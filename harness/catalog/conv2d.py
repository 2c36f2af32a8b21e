from gpubench.harness.core.columns import Column
from gpubench.harness.core.workload_spec import IdRule, PlotSpec, ReportSection, WorkloadSpec

SPEC = WorkloadSpec(
    name="conv2d",
    id_rule=IdRule(
        ("dtype", "channels_last", "cudnn_benchmark", "batch_size"),
        always=frozenset({"channels_last"}),
    ),
    headlines=(("tflops", "{:.3g} TFLOP/s"), ("samples_per_s", "{:.4g} samples/s")),
    # torch.backends.cudnn.benchmark in the case (cuda only)
    columns=(Column("cudnn_benchmark", "bool", "case"),),
    report=ReportSection(
        "Convolution (3x3, forward)",
        intro="One 3x3 convolution layer, forward under inference_mode, per dtype and memory "
        "format (and cuDNN autotuning on cuda); medians over builds, `spread` between builds. On "
        "cuda, fp32 is true fp32 (cuDNN's TF32 off for the case).",
        table=(
            "machine",
            "dtype",
            "channels_last",
            "cudnn_benchmark",
            "batch_size",
            "tflops",
            "samples_per_s",
            "spread",
            "flags",
        ),
        plot=PlotSpec(x="dtype", y="tflops", hue="channels_last", logy=True),
        order=45,
    ),
)
