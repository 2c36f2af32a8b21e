from gpubench.harness.core.workload_spec import IdRule, ReportSection, WorkloadSpec

SPEC = WorkloadSpec(
    name="ddp",
    id_rule=IdRule(("parallel", "world_size", "backend", "batch_size")),
    builds={"smoke": 1, "quick": 1, "full": 1},  # a launch is seconds of process start; steps give the spread
    markers=("slow", "training", "distributed"),
    headlines=(("samples_per_s", "{:.4g} samples/s"), ("scaling_efficiency", "scaling efficiency {:.2f}")),
    report=ReportSection("Multi-process training", table=("machine", "parallel", "backend", "world_size", "samples_per_s",
                                                          "samples_per_s_per_rank", "step_s", "scaling_efficiency"), order=100),
)
