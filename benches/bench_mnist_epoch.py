"""A full MNIST CNN training epoch (60k train + 10k eval) under the guide's settings (§5–§8)."""

from harness.workloads import mnist_epoch as gpubench_workload


def test_mnist_epoch(case, gpubench):
    gpubench.run(case)
