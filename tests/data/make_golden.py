"""Writes the golden result files the report tests read. Run once; the CSVs are committed.

Two machines (a CPU laptop and an H100 box), a few workloads, a skipped row and an oom row.
Samples are drawn around fixed medians so the report's numbers are known in advance.
"""

from __future__ import annotations

import random
from pathlib import Path

from gpubench.harness.records.results import ResultsWriter

HERE = Path(__file__).parent

MACHINES = {
    "golden_laptop": dict(
        machine_id="aaaaaaaaaaaa",
        hostname="laptop",
        device="cpu",
        device_name="Intel Core i7",
        torch_version="2.14.1",
        cuda_version="",
        cpu_model="Intel Core i7",
        cpu_cores=8,
    ),
    "golden_h100": dict(
        machine_id="bbbbbbbbbbbb",
        hostname="h100box",
        device="cuda:0",
        device_name="NVIDIA H100 80GB HBM3",
        torch_version="2.14.1",
        cuda_version="13.0",
        cpu_model="Xeon",
        cpu_cores=64,
    ),
}

# (workload, case_id, settings, median_s per machine, extra figures per machine)
CASES = [
    ("matmul", "matmul/dtype=fp32-size=1024", dict(dtype="fp32", size=1024), (0.01, 0.00005)),
    ("matmul", "matmul/dtype=fp32-size=2048", dict(dtype="fp32", size=2048), (0.08, 0.0003)),
    ("matmul", "matmul/dtype=bf16-size=2048", dict(dtype="bf16", size=2048), (0.02, 0.00003)),
    (
        "elementwise",
        "elementwise/op=add-dtype=fp32-size=16777216",
        dict(op="add", dtype="fp32", size=2**24),
        (0.004, 0.00006),
    ),
    (
        "mnist_epoch",
        "mnist_epoch/guide-template",
        dict(batch_size=256, loader="dataloader", num_workers=4, precision="fp32"),
        (18.0, 3.0),
    ),
    (
        "mnist_epoch",
        "mnist_epoch/loader=preloaded",
        dict(batch_size=256, loader="preloaded", num_workers=0, precision="fp32"),
        (8.0, 0.6),
    ),
    (
        "memory_strategies",
        "memory_strategies/strategy=baseline",
        dict(strategy="baseline", batch_size=256),
        (0.06, 0.0025),
    ),
]


def rows_for(index: int, machine: dict) -> list[dict]:
    rng = random.Random(index)
    rows = []
    for workload, case_id, settings, medians in CASES:
        median = medians[index]
        samples = [
            median * (1 + rng.uniform(-0.02, 0.02))
            for _ in range(1 if workload == "mnist_epoch" else 9)
        ]
        row = dict(
            machine,
            schema_version=1,
            run_id=f"run-{machine['hostname']}",
            timestamp_utc="2026-11-29T00:00:00+00:00",
            profile="quick",
            workload=workload,
            case_id=case_id,
            rounds=len(samples),
            iterations=1,
            median_s=sorted(samples)[len(samples) // 2],
            iqr_s=0.0,
            min_s=min(samples),
            mean_s=sum(samples) / len(samples),
            stddev_s=0.0,
            status="ok",
            reason="",
            samples_s=samples,
            **settings,
        )
        if workload == "matmul":
            row["tflops"] = 2 * settings["size"] ** 3 / row["median_s"] / 1e12
        if workload == "elementwise":
            row["gbps"] = 3 * 4 * settings["size"] / row["median_s"] / 1e9
        if workload == "mnist_epoch":
            row.update(
                dataset="fashion-mnist",
                epoch_s=median,
                samples_per_s=60000 / median,
                test_accuracy=0.86,
                data_wait_frac=0.6 if settings["loader"] == "dataloader" and index == 1 else 0.02,
                input_bound=settings["loader"] == "dataloader" and index == 1,
                peak_mem_bytes=400 * 2**20,
            )
        if workload == "memory_strategies":
            row.update(
                step_s=median,
                peak_mem_bytes=350 * 2**20,
                effective_batch=256,
                samples_per_s=256 / median,
            )
        rows.append(row)
    base = dict(
        machine,
        schema_version=1,
        run_id=f"run-{machine['hostname']}",
        timestamp_utc="2026-11-29T00:00:00+00:00",
        profile="quick",
    )
    if machine["device"] == "cpu":
        rows.append(
            dict(
                base,
                workload="matmul",
                case_id="matmul/dtype=tf32-size=1024",
                dtype="tf32",
                size=1024,
                status="skipped",
                reason="tf32 is a CUDA tensor-core mode; not available on cpu",
            )
        )
    else:
        rows.append(
            dict(
                base,
                workload="memory_strategies",
                case_id="memory_strategies/strategy=huge",
                strategy="huge",
                status="oom",
                reason="OutOfMemoryError: CUDA out of memory. Tried to allocate 90.00 GiB",
            )
        )
    return rows


def main() -> None:
    for index, (name, machine) in enumerate(MACHINES.items()):
        path = HERE / f"{name}.csv"
        path.unlink(missing_ok=True)
        writer = ResultsWriter(HERE, name)
        for row in rows_for(index, machine):
            writer.append(row)
        writer.close()


if __name__ == "__main__":
    main()
