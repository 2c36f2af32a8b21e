"""Square matmul TFLOP/s per dtype over the profile's size ladder."""

from gpubench.harness.workloads.matmul import WORKLOAD as gpubench_workload  # noqa: F401 - the plugin reads it


def test_matmul(case, gpubench):
    gpubench.run(case)
