from gpubench.harness.core.columns import Column
from gpubench.harness.core.workload_spec import IdRule, ReportSection, WorkloadSpec

SPEC = WorkloadSpec(
    name="time_to_accuracy",
    # the design's name is its identity (its settings are columns of the row): speedrun-to0.85
    id_rule=IdRule(("design", "target_accuracy"), label="template"),
    # one seed per build
    builds={"smoke": 1, "quick": 1, "full": 5},
    markers=("slow", "training"),
    headlines=(
        ("time_to_target_s", "{:.3g} s to target"),
        ("epochs_to_target", "{:.2g} epochs"),
        ("test_accuracy", "accuracy {:.3f}"),
    ),
    # An `unreached` row's time spent, apart from time_to_target_s so it is never read as a time to
    # target.
    columns=(
        # from the data's first touch to the stop, evaluations included
        Column("training_s", "float", "figure", "s"),
        Column("epochs_trained", "float", "figure", "epochs"),
        # budget (its share of --budget) or cap (the profile's epoch cap)
        Column("stopped_by", "str", "figure"),
    ),
    report=ReportSection("Time to accuracy", renderer="time_to_accuracy", order=70),
)
