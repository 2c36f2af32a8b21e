from gpubench.harness.core.workload_spec import IdRule, ReportSection, WorkloadSpec, n_size

# One build: the CPU side alone takes seconds per call, and the figure is a ratio within the build.
SPEC = WorkloadSpec(
    name="matmul_speedup",
    id_rule=IdRule(("dtype", "size"), size_token=n_size),
    builds={"smoke": 1, "quick": 1, "full": 3},
    markers=("gpu",),
    headlines=(("tflops", "{:.3g} TFLOP/s"), ("speedup", "speedup {:.3g}x")),
    report=ReportSection("GPU over CPU (n=5000 fp32 matmul)", renderer="matmul_speedup", order=20),
)
