"""Time (and energy) to a target test accuracy: template vs fastest epoch setting vs speedrun."""

# the plugin reads it
from gpubench.harness.workloads.time_to_accuracy import WORKLOAD as gpubench_workload  # noqa: F401


def test_time_to_accuracy(case, gpubench):
    gpubench.run(case)
