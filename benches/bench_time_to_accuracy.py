"""Time (and energy) to a target test accuracy: template vs fastest epoch setting vs speedrun."""

from harness.workloads import time_to_accuracy as gpubench_workload


def test_time_to_accuracy(case, gpubench):
    gpubench.run(case)
