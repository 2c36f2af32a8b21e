"""Host<->device copies: pageable vs pinned, blocking vs non_blocking."""

from gpubench.harness.workloads.transfer import WORKLOAD as gpubench_workload  # noqa: F401 - the plugin reads it


def test_transfer(case, gpubench):
    gpubench.run(case)
