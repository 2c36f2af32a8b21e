"""The harness clock checked against torch.utils.benchmark and CUDA events."""

from harness.workloads import selfcheck

gpubench_cases = selfcheck.cases


def test_selfcheck(case, gpubench):
    gpubench.run(case, selfcheck.build)
