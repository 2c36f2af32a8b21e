from gpubench.harness.core.workload_spec import IdRule, ReportSection, WorkloadSpec, n_size

SPEC = WorkloadSpec(
    name="matmul",
    id_rule=IdRule(("dtype", "size"), size_token=n_size),
    headlines=(("tflops", "{:.3g} TFLOP/s"),),
    report=ReportSection("Matmul", renderer="matmul", order=10),
)
