"""Your own model's training step and inference (`gpubench run --model module:factory --input
SHAPE`); without --model this module has no cases and is not collected."""

from gpubench.harness.workloads.model import WORKLOAD as gpubench_workload  # noqa: F401 - the plugin reads it


def test_model(case, gpubench):
    gpubench.run(case)
