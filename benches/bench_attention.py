"""scaled_dot_product_attention TFLOP/s per backend, pass, mask and length, against this machine's
own matmul."""

from gpubench.harness.workloads.attention import WORKLOAD as gpubench_workload  # noqa: F401 - the plugin reads it


def test_attention(case, gpubench):
    gpubench.run(case)
