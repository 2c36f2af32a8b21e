"""The interconnect: collectives across ranks under torchrun (gloo on CPU, nccl on GPU), with
nccl-tests' algbw, busbw and result check."""

from gpubench.harness.workloads.collectives import WORKLOAD as gpubench_workload  # noqa: F401 - the plugin reads it


def test_collectives(case, gpubench):
    gpubench.run(case)
