"""The results row schema. Torch-free: the report builder imports it too.

Every setting is its own column, so reports never parse test names. A column unused by a
workload stays empty. Bump SCHEMA_VERSION when a column changes meaning or is removed, and teach
`upgrade_row` how to read the old version.
"""

from __future__ import annotations

SCHEMA_VERSION = 1

RUN_COLUMNS = (
    "schema_version", "run_id", "timestamp_utc", "profile", "machine_id", "hostname", "device",
    "device_name", "device_count", "torch_version", "cuda_version", "cudnn_version", "driver_version",
    "gpu_mem_bytes", "sm_count", "compute_capability", "cpu_model", "cpu_cores", "ram_bytes", "os",
    "python_version", "torch_threads", "tf32_matmul", "tf32_cudnn", "gpubench_version", "git_commit",
)

CASE_COLUMNS = (
    "workload", "case_id", "dtype", "size", "op", "direction", "pinned", "non_blocking", "model",
    "batch_size", "grad_mode", "dataset", "loader", "num_workers", "pin_memory", "persistent_workers",
    "prefetch_factor", "precision", "channels_last", "compile_mode", "checkpointing", "accumulation_steps",
    "effective_batch", "freeze_features", "strategy", "world_size", "backend", "parallel",
)

MEASUREMENT_COLUMNS = (
    "rounds", "iterations", "median_s", "iqr_s", "min_s", "mean_s", "stddev_s", "cv",
    "tflops", "peak_tflops", "pct_of_peak", "gbps", "peak_mem_bytes", "mem_allocated_bytes",
    "mem_reserved_bytes", "samples_per_s", "latency_s", "epoch_s", "step_s", "data_wait_frac",
    "input_bound", "train_loss", "test_accuracy", "compile_s", "eager_step_s", "break_even_steps",
    "baseline_median_s", "speedup", "selfcheck_tub_ratio", "selfcheck_events_ratio",
    "samples_per_s_per_rank", "scaling_efficiency", "gpu_sm_clock_mhz", "gpu_temp_c", "gpu_power_w",
    "profile_ops", "status", "reason", "samples_s",
)

COLUMNS = RUN_COLUMNS + CASE_COLUMNS + MEASUREMENT_COLUMNS

REQUIRED_COLUMNS = (
    "schema_version", "run_id", "timestamp_utc", "machine_id", "hostname", "device", "device_name",
    "torch_version", "cuda_version", "workload", "case_id", "dtype", "size", "rounds", "median_s",
    "iqr_s", "min_s", "mean_s", "stddev_s", "tflops", "gbps", "peak_mem_bytes", "status", "reason",
)

STATUSES = ("ok", "skipped", "failed", "oom")


class SchemaError(ValueError):
    """A results file this version cannot read; the message names the file and the fix."""


def upgrade_row(row: dict[str, str], version: int, source: str) -> dict[str, str]:
    """Bring a row written by schema `version` up to SCHEMA_VERSION; refuse newer ones."""
    if version > SCHEMA_VERSION:
        raise SchemaError(
            f"{source}: written by a newer gpubench (schema {version}, this one reads <= {SCHEMA_VERSION}) — upgrade gpubench to read it"
        )
    if version < 1:
        raise SchemaError(f"{source}: schema_version {version} is not a gpubench schema")
    # Version 1 is the first; future upgrades go here, oldest first.
    return row
