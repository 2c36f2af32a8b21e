"""Out-of-memory strategies: peak memory against step time for each out-of-memory strategy."""

from gpubench.harness.workloads.memory_strategies import WORKLOAD as gpubench_workload  # noqa: F401 - the plugin reads it


def test_memory_strategies(case, gpubench):
    gpubench.run(case)
