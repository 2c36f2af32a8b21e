from gpubench.harness.core.columns import Column
from gpubench.harness.core.workload_spec import IdRule, ReportSection, WorkloadSpec, pow2_size

SPEC = WorkloadSpec(
    name="elementwise",
    # the DRAM case's size comes from the device's last-level cache (STREAM's rule): its id names
    # it, add-fp32-2^25
    id_rule=IdRule(("op", "dtype", "size"), size_token=pow2_size),
    headlines=(("gbps", "{:.3g} GB/s"),),
    # the last-level cache, every instance summed, that memory_tier and the DRAM case's size were
    # judged against
    columns=(Column("llc_total_bytes", "int", "figure", "bytes"),),
    report=ReportSection("Elementwise", renderer="bandwidth", order=40),
)
