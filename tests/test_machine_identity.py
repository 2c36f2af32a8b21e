"""One machine, one identity: the rows' machine_id, the store's folder, the budget's history and
compare's one-machine check agree. A kernel or driver update is the same machine; another GPU or
another host is another one. Real fingerprints (the kernel, the NVML GPU list and the host name
faked) through real CSVs, as a run writes them."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import torch

from gpubench.harness.commands.cli import main
from gpubench.harness.devices import env
from gpubench.harness.records.durations import history
from gpubench.harness.records.results import ResultsWriter
from gpubench.harness.records.schema import SCHEMA, SCHEMA_VERSION
from gpubench.harness.records.store import machine_folder_name, machine_id, safe_name

CASE = "matmul/fp32-n64"
NOW_S = datetime(2026, 12, 1, tzinfo=timezone.utc).timestamp()
COLUMNS = {column.name for column in SCHEMA}
H200S = ["NVIDIA H200"] * 8


def fingerprint(
    monkeypatch: pytest.MonkeyPatch,
    kernel: str = "6.8.0-45-generic",
    gpus: list[str] = H200S,
    host: str = "gpu-node07",
) -> dict[str, Any]:
    """This machine's fingerprint under another kernel, GPU list (NVML's, every GPU of the node) or
    host name."""
    monkeypatch.setattr(env.platform, "release", lambda: kernel)
    monkeypatch.setattr(env, "nvml_gpu_names", lambda: list(gpus))
    monkeypatch.setattr(env.socket, "gethostname", lambda: host)
    return env.fingerprint(torch.device("cpu"))


def write_run(folder: Path, run_id: str, fields: dict[str, Any], day: str, **cells: Any) -> None:
    """A run's CSV: three builds of one case, its fingerprint's columns on every row."""
    folder.mkdir(parents=True, exist_ok=True)
    writer = ResultsWriter(folder, run_id)
    for build in range(3):
        median_s = 1e-3 * (1 + build / 100)
        writer.append(
            {
                **{k: v for k, v in fields.items() if k in COLUMNS},
                "schema_version": SCHEMA_VERSION,
                "run_id": run_id,
                "timestamp_utc": f"{day}T12:00:00+00:00",
                "profile": "quick",
                "workload": "matmul",
                "case_id": CASE,
                "build": build,
                "median_s": median_s,
                "samples_s": [median_s] * 5,
                "status": "ok",
                "build_s": 2.0,
                "first_call_s": 0.1,
                **cells,
            }
        )
    writer.close()


def compare(folder: Path, new: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["compare", str(folder), str(new)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_a_kernel_and_driver_update_is_the_same_machine(monkeypatch, tmp_path, capsys):
    before = fingerprint(monkeypatch, kernel="6.8.0-45-generic")
    after = fingerprint(monkeypatch, kernel="6.11.0-9-generic")
    assert before["os"] != after["os"] and before["machine_id"] == after["machine_id"]
    # the store's folder is the same identity: the run's rows and its folder never disagree
    assert machine_folder_name(env.machine_identity()) == f"gpu-node07-{after['machine_id'][:8]}"
    folder = tmp_path / machine_folder_name(env.machine_identity())
    write_run(folder, "r1", before, "2026-11-01", driver_version="550.54")
    # the first --budget run after the update prices the case from the run before it
    found = history(folder, after["machine_id"], "cpu", "quick", now_s=NOW_S)
    assert found.costs[CASE].build_s == 2.0 and not found.set_aside
    write_run(folder, "r2", after, "2026-11-20", driver_version="570.86")
    write_run(tmp_path / "new", "r3", after, "2026-11-30")
    # the folder's two runs pool as one machine's
    code, out = compare(folder, tmp_path / "new", capsys)
    assert code == 0, out
    assert "machines" not in out


@pytest.mark.parametrize(
    "other",
    [dict(gpus=["NVIDIA H100 80GB HBM3"] * 8), dict(gpus=H200S[:4]), dict(host="gpu-node08")],
    ids=["another GPU", "fewer GPUs", "another host"],
)
def test_another_gpu_or_host_is_another_machine(monkeypatch, tmp_path, capsys, other):
    mine = fingerprint(monkeypatch)
    folder = tmp_path / machine_folder_name(env.machine_identity())
    theirs = fingerprint(monkeypatch, **other)
    assert theirs["machine_id"] != mine["machine_id"]
    assert machine_folder_name(env.machine_identity()) != folder.name
    # one results folder, another machine's run in it
    write_run(folder, "r1", theirs, "2026-11-01")
    assert history(folder, mine["machine_id"], "cpu", "quick", now_s=NOW_S).costs == {}
    write_run(folder, "r2", mine, "2026-11-20")
    write_run(tmp_path / "new", "r3", mine, "2026-11-30")
    code, out = compare(folder, tmp_path / "new", capsys)
    assert code == 2 and "holds runs from 2 machines" in out, out


def test_machine_id_is_the_host_and_hardware_only():
    identity = {
        "hostname": "n1",
        "cpu_model": "AMD EPYC 9654",
        "cpu_cores": 192,
        "ram_gib": 1536,
        "gpus": "NVIDIA H200,NVIDIA H200",
    }
    assert len(machine_id(identity)) == 12 and int(machine_id(identity), 16) >= 0
    # a fingerprint's other fields (kernel, driver, versions) are not read
    assert machine_id(
        dict(identity, os="Linux 6.1", driver_version="570", torch_version="2.9")
    ) == machine_id(identity)
    for key, value in (
        ("hostname", "n2"),
        ("cpu_model", "Intel"),
        ("cpu_cores", 96),
        ("ram_gib", 768),
    ):
        assert machine_id(dict(identity, **{key: value})) != machine_id(identity), key
    assert machine_folder_name(identity) == f"{safe_name('n1')}-{machine_id(identity)[:8]}"


def test_an_older_gpubenchs_rows_read_as_the_stores_machine(tmp_path):
    """Through schema 5 machine_id hashed the kernel and the GPUs torch saw, and no host name: read,
    an old row's id is the store's over its own host, CPU model, cores and RAM in GiB (no GPU list:
    the rows hold none), whatever its kernel; a row of this schema keeps the id it was written
    with."""
    from gpubench.harness.records.results_reader import read_rows

    fields = {
        "hostname": "n1",
        "cpu_model": "AMD EPYC 9654",
        "cpu_cores": 192,
        "ram_bytes": 1536 * 2**30 - 4096,
        "device": "cuda:0",
        "device_name": "NVIDIA H200",
        "torch_version": "2.11.0",
        "cuda_version": "13.0",
    }
    for run_id, kernel, written in (("r1", "6.8", "0123456789ab"), ("r2", "6.11", "ba9876543210")):
        write_run(
            tmp_path / "old",
            run_id,
            dict(fields, os=kernel, machine_id=written),
            "2026-11-01",
            schema_version=5,
        )
    write_run(tmp_path / "new", "r3", dict(fields, machine_id="feedfacecafe"), "2026-12-01")
    store = {"hostname": "n1", "cpu_model": "AMD EPYC 9654", "cpu_cores": 192, "ram_gib": 1536}
    old = {
        row["machine_id"]
        for name in ("r1", "r2")
        for row in read_rows(tmp_path / "old" / f"{name}.csv")
    }
    assert old == {machine_id(dict(store, gpus=""))}
    assert {row["machine_id"] for row in read_rows(tmp_path / "new" / "r3.csv")} == {"feedfacecafe"}
