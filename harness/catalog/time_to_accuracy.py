from gpubench.harness.core.workload_spec import IdRule, ReportSection, WorkloadSpec

SPEC = WorkloadSpec(
    name="time_to_accuracy",
    # the design's name is its identity (its settings are columns of the row): speedrun-to0.85
    id_rule=IdRule(("design", "target_accuracy"), label="template"),
    builds={"smoke": 1, "quick": 1, "full": 5},  # one seed per build
    markers=("slow", "training"),
    headlines=(("time_to_target_s", "{:.3g} s to target"), ("epochs_to_target", "{:.2g} epochs"),
               ("test_accuracy", "accuracy {:.3f}")),
    report=ReportSection("Time to accuracy", renderer="time_to_accuracy", order=70),
)
