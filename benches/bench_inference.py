"""MLP and CNN forward passes: samples/s and latency under grad, no_grad and inference_mode."""

from gpubench.harness.workloads.inference import WORKLOAD as gpubench_workload  # noqa: F401 - the plugin reads it


def test_inference(case, gpubench):
    gpubench.run(case)
