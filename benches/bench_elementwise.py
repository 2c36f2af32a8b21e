"""Memory-bound elementwise ops: GB/s counting bytes read + written (guide §1)."""

from harness.workloads import elementwise as gpubench_workload


def test_elementwise(case, gpubench):
    gpubench.run(case)
