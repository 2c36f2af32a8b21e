"""3x3 convolution TFLOP/s per dtype, memory format and cuDNN autotuning."""

from gpubench.harness.workloads.conv2d import WORKLOAD as gpubench_workload  # noqa: F401 - the plugin reads it


def test_conv2d(case, gpubench):
    gpubench.run(case)
