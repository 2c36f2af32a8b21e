"""Guide §8.5: peak memory against step time for each out-of-memory strategy."""

from harness.workloads import memory_strategies as gpubench_workload


def test_memory_strategies(case, gpubench):
    gpubench.run(case)
