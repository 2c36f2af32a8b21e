"""Host<->device copies: pageable vs pinned, blocking vs non_blocking (guide §1, §3)."""

from harness.workloads import transfer as gpubench_workload


def test_transfer(case, gpubench):
    gpubench.run(case)
