"""The harness clock checked against torch.utils.benchmark and CUDA events."""

from harness.workloads import selfcheck as gpubench_workload


def test_selfcheck(case, gpubench):
    gpubench.run(case)
