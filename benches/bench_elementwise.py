"""Memory-bound elementwise ops: GB/s counting bytes read + written."""

from gpubench.harness.workloads.elementwise import WORKLOAD as gpubench_workload  # noqa: F401 - the plugin reads it


def test_elementwise(case, gpubench):
    gpubench.run(case)
