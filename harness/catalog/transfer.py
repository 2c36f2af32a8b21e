from gpubench.harness.core.workload_spec import IdRule, ReportSection, WorkloadSpec, bytes_size

SPEC = WorkloadSpec(
    name="transfer",
    id_rule=IdRule(("direction", "size", "pinned", "non_blocking"), size_token=bytes_size),
    # host<->device copies need an accelerator
    markers=("gpu",),
    headlines=(("gbps", "{:.3g} GB/s"),),
    report=ReportSection("Transfer", renderer="bandwidth", order=30),
)
