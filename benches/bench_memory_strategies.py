"""Out-of-memory strategies: peak memory against step time for each out-of-memory strategy."""

# the plugin reads it
from gpubench.harness.workloads.memory_strategies import WORKLOAD as gpubench_workload  # noqa: F401


def test_memory_strategies(case, gpubench):
    gpubench.run(case)
