"""Multi-process training: DDP on torchrun (gloo on CPU, nccl on GPU) against one process, and
DataParallel at the same global batch (guide §6)."""

from harness.workloads import ddp as gpubench_workload


def test_ddp(case, gpubench):
    gpubench.run(case)
