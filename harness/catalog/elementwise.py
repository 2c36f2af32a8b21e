from gpubench.harness.core.workload_spec import IdRule, ReportSection, WorkloadSpec, pow2_size

SPEC = WorkloadSpec(
    name="elementwise",
    id_rule=IdRule(("op", "dtype", "size"), size_token=pow2_size),
    headlines=(("gbps", "{:.3g} GB/s"),),
    report=ReportSection("Elementwise", renderer="bandwidth", order=40),
)
