from gpubench.harness.core.workload_spec import IdRule, ReportSection, WorkloadSpec

SPEC = WorkloadSpec(
    name="memory_strategies",
    id_rule=IdRule(
        ("strategy", "precision", "accumulation_steps", "batch_size"),
        {"precision": "fp32", "accumulation_steps": 1},
    ),
    builds={"smoke": 1, "quick": 2, "full": 5},
    markers=("training",),
    headlines=(("samples_per_s", "{:.4g} samples/s"),),
    report=ReportSection(
        "Out-of-memory strategies: peak memory against step time",
        renderer="memory_strategies",
        order=80,
    ),
)
