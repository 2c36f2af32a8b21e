"""The guide's n=5000 fp32 matmul: CPU against the GPU, with the speedup (guide §3.3)."""

from harness.workloads import speedup

gpubench_cases = speedup.cases


def test_speedup(case, gpubench):
    gpubench.run(case, speedup.build)
