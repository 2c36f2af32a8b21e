"""Square matmul TFLOP/s per dtype over the profile's size ladder (guide §1, §3.3)."""

from harness.workloads import matmul as gpubench_workload


def test_matmul(case, gpubench):
    gpubench.run(case)
