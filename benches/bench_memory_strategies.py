"""Guide §8.5: peak memory against step time for each out-of-memory strategy."""

from harness.workloads import memory_strategies

gpubench_cases = memory_strategies.cases


def test_memory_strategies(case, gpubench):
    gpubench.run(case, memory_strategies.builder(gpubench.data))
