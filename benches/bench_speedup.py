"""The n=5000 fp32 matmul on the CPU against the GPU, with the speedup."""

from gpubench.harness.workloads.speedup import WORKLOAD as gpubench_workload  # noqa: F401 - the plugin reads it


def test_speedup(case, gpubench):
    gpubench.run(case)
