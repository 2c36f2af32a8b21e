"""The harness clock checked against torch.utils.benchmark and CUDA events."""

from gpubench.harness.workloads.selfcheck import WORKLOAD as gpubench_workload  # noqa: F401 - the plugin reads it


def test_selfcheck(case, gpubench):
    gpubench.run(case)
