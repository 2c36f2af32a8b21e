from gpubench.harness.core.workload_spec import IdRule, ReportSection, WorkloadSpec, n_size

SPEC = WorkloadSpec(
    name="selfcheck",
    id_rule=IdRule(("dtype", "size"), size_token=n_size),
    # the interleaved pairs already repeat the measurement
    builds={"smoke": 1, "quick": 1, "full": 3},
    headlines=(
        ("tflops", "{:.3g} TFLOP/s"),
        ("selfcheck_tub_ratio", "harness/torch.utils.benchmark {:.3f}"),
        ("selfcheck_events_ratio", "harness/CUDA events {:.3f}"),
    ),
    report=ReportSection("Timer self-check", renderer="selfcheck", order=50),
)
