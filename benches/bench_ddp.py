"""Multi-process training: DDP on torchrun (gloo on CPU, nccl on GPU) against one process, and
DataParallel at the same global batch."""

from gpubench.harness.workloads.ddp import WORKLOAD as gpubench_workload  # noqa: F401 - the plugin reads it


def test_ddp(case, gpubench):
    gpubench.run(case)
