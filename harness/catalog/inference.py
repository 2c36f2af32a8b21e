from gpubench.harness.core.workload_spec import IdRule, ReportSection, WorkloadSpec

SPEC = WorkloadSpec(
    name="inference",
    id_rule=IdRule(("model", "batch_size", "grad_mode")),
    headlines=(("samples_per_s", "{:.4g} samples/s"),),
    report=ReportSection(
        "Inference",
        table=(
            "machine",
            "model",
            "batch_size",
            "grad_mode",
            "samples_per_s",
            "latency_s",
            "spread",
            "flags",
        ),
        order=90,
        fold="grad_mode",
    ),
)
