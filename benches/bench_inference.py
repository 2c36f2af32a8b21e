"""MLP and CNN forward passes: samples/s and latency under grad, no_grad and inference_mode."""

from harness.workloads import inference as gpubench_workload


def test_inference(case, gpubench):
    gpubench.run(case)
