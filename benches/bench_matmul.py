"""Square matmul TFLOP/s per dtype over the profile's size ladder (guide §1, §3.3)."""

from harness.workloads import matmul

gpubench_cases = matmul.cases


def test_matmul(case, gpubench):
    gpubench.run(case, matmul.build)
