"""A full MNIST CNN training epoch (60k train + 10k eval) under each training setting."""

from gpubench.harness.workloads.mnist_epoch import WORKLOAD as gpubench_workload  # noqa: F401 - the plugin reads it


def test_mnist_epoch(case, gpubench):
    gpubench.run(case)
