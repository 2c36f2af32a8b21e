"""A GPT-style decoder's training step: tokens/s, MFU and peak memory per precision, compile,
attention backend and optimizer."""

from gpubench.harness.workloads.transformer import WORKLOAD as gpubench_workload  # noqa: F401 - the plugin reads it


def test_transformer(case, gpubench):
    gpubench.run(case)
