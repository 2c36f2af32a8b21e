"""The guide's n=5000 fp32 matmul: CPU against the GPU, with the speedup (guide §3.3)."""

from harness.workloads import speedup as gpubench_workload


def test_speedup(case, gpubench):
    gpubench.run(case)
