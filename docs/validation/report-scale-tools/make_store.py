"""A synthetic results store of RUNS runs over MACHINES machines, for timing `gpubench report STORE`
at scale. Not measurements: every row is a template row (a real run's, read by gpubench.harness.records.results.read_rows)
given another machine, date and figure.

    python docs/validation/report-scale-tools/make_store.py STORE RUNS MACHINES --cpu-template CPU.csv \\
        --gpu-template reports/examples/h200-quick.csv

Machines alternate between GPU nodes (the GPU template's rows, as an H200, H100 or A100 node with its own
CPU, cores and RAM) and CPU hosts (the CPU template's rows, with several CPU models). Each machine's runs
are spread over six months. With --upgrades, its kernel is updated half-way (a new machine_id, as gpubench.harness.devices.env
hashes the kernel release) and every third machine moves to a newer torch then: the report then holds more
configurations (a torch version is one; two machine_ids of one host are two labels). Micro-benchmark rows are written as
BUILDS builds (the quick profile builds them 3 times), each figure a few % off the template's, drifting
slowly over the runs. Files are laid out as `gpubench run --store` lays them out:
`<store>/<host>-<hash>/<run_id>.csv`, with the template's `.env.json` beside each.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import random
import shutil
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from gpubench.harness.records.results import read_rows
from gpubench.harness.records.schema import BY_NAME, COLUMNS, to_cell

START = datetime(2026, 6, 1, 2, 0, tzinfo=timezone.utc)
SPAN = timedelta(days=182)  # the runs of a machine spread over six months
MULTI_BUILD = {"matmul", "transfer", "elementwise", "conv2d", "attention", "inference", "collectives"}
TIMES = {n for n, s in BY_NAME.items() if s.unit == "s" and s.kind == "float"} | {"samples_s"}
RATES = {n for n, s in BY_NAME.items() if s.unit in ("TFLOP/s", "GB/s", "samples/s", "tokens/s", "%")}


@dataclass(frozen=True)
class Hardware:
    device: str
    device_name: str
    cpu_model: str
    cpu_cores: int
    ram_gib: int
    speed: float  # figures relative to the template's machine


GPUS = [Hardware("cuda:0", "NVIDIA H200", "Intel(R) Xeon(R) Platinum 8480+", 112, 2048, 1.0),
        Hardware("cuda:0", "NVIDIA H100 80GB HBM3", "AMD EPYC 9654 96-Core Processor", 192, 1536, 0.93),
        Hardware("cuda:0", "NVIDIA A100-SXM4-80GB", "AMD EPYC 7763 64-Core Processor", 128, 1024, 0.36)]
CPUS = [Hardware("cpu", "", "AMD EPYC 7B13", 2, 8, 1.0),
        Hardware("cpu", "", "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", 8, 32, 3.1),
        Hardware("cpu", "", "AMD Ryzen 9 7950X 16-Core Processor", 16, 64, 5.4)]


def machine_row(row: dict[str, Any], host: str, hw: Hardware, kernel: str, torch: str) -> dict[str, Any]:
    """The template row as one of this machine's: host, hardware, kernel, torch and machine_id."""
    machine_id = hashlib.sha256(f"{host}|{hw.cpu_model}|{hw.cpu_cores}|{hw.ram_gib}|{kernel}".encode()).hexdigest()[:12]
    return dict(row, hostname=host, machine_id=machine_id, cpu_model=hw.cpu_model, cpu_cores=hw.cpu_cores,
                ram_bytes=hw.ram_gib * 2**30, os=f"Linux {kernel}", torch_version=torch,
                device_name=hw.device_name or hw.cpu_model, device=hw.device)


def scaled(row: dict[str, Any], factor: float) -> dict[str, Any]:
    """The row `factor` times faster: times divided, rates multiplied."""
    out = dict(row)
    for column, value in row.items():
        if value is None or isinstance(value, bool):
            continue
        if column == "samples_s":
            out[column] = [v / factor for v in value]
        elif column in TIMES:
            out[column] = value / factor
        elif column in RATES:
            out[column] = value * factor
    return out


def write_run(path: Path, rows: list[dict[str, Any]], when: datetime, builds: int, rng: random.Random) -> None:
    """One run's CSV: each template row (MULTI_BUILD workloads as `builds` builds), a second apart."""
    run_id = path.stem
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        for index, row in enumerate(rows):
            count = builds if row["workload"] in MULTI_BUILD and row["status"] == "ok" else 1
            for build in range(count):
                at = (when + timedelta(seconds=index * 3 + build)).isoformat(timespec="seconds")
                out = scaled(row, rng.gauss(1.0, 0.02)) if row["status"] == "ok" else dict(row)
                out.update(run_id=run_id, timestamp_utc=at, build=build, builds=count)
                writer.writerow([to_cell(out.get(c)) for c in COLUMNS])


def make_machine(store: Path, number: int, runs: int, templates: list[list[dict[str, Any]]], builds: int,
                 sidecars: list[Path | None], upgrades: bool) -> None:
    gpu = number % 2 == 0
    kind = 0 if gpu else 1
    hw = (GPUS if gpu else CPUS)[(number // 2) % 3]
    host = f"{'gpu' if gpu else 'cpu'}node{number:03d}"
    rng = random.Random(number)
    folder = store / f"{host}-{hashlib.sha256(host.encode()).hexdigest()[:8]}"
    folder.mkdir(parents=True, exist_ok=True)
    for run in range(runs):
        later = upgrades and run >= runs // 2
        kernel = "6.8.0-52-generic" if later else "6.8.0-31-generic"
        torch = "2.14.1" if later and number % 3 == 0 else "2.13.0"
        rows = [scaled(machine_row(r, host, hw, kernel, torch), hw.speed * (1 - 0.001 * run)) for r in templates[kind]]
        when = START + SPAN * run / max(runs, 1) + timedelta(hours=number, minutes=rng.randrange(60))
        path = folder / f"{when:%Y%m%dT%H%M%SZ}-{host}-{run:04x}.csv"
        write_run(path, rows, when, builds, rng)
        if sidecars[kind] is not None:
            shutil.copy(sidecars[kind], path.with_suffix(".env.json"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("runs", type=int, help="runs in all, shared evenly between the machines")
    parser.add_argument("machines", type=int)
    parser.add_argument("--gpu-template", type=Path, required=True, help="a results CSV of a GPU run")
    parser.add_argument("--cpu-template", type=Path, required=True, help="a results CSV of a CPU run")
    parser.add_argument("--builds", type=int, default=3, help="builds of each micro-benchmark row")
    parser.add_argument("--upgrades", action="store_true",
                        help="a kernel update half-way, and a torch update on every third machine")
    args = parser.parse_args()
    if args.runs % args.machines:
        parser.error(f"{args.runs} runs do not share evenly between {args.machines} machines — pass a multiple")
    paths = [args.gpu_template, args.cpu_template]
    templates = [[dict(r, build=0, builds=1) for r in read_rows(p)] for p in paths]
    sidecars = [p.with_suffix(".env.json") if p.with_suffix(".env.json").exists() else None for p in paths]
    for number in range(args.machines):
        make_machine(args.store, number, args.runs // args.machines, templates, args.builds, sidecars, args.upgrades)


if __name__ == "__main__":
    main()
