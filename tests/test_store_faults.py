"""The store campaign's fixes (docs/validation/fault-campaign-store.md): one test per fix, each seen
to fail with the line it guards broken. Stores are built from the committed H200 run
(tests/test_health.py's copy_of), no measuring; `--store` checks call gpubench.harness.records.store
directly."""

from __future__ import annotations

import builtins
import errno
import os
import re
from pathlib import Path

import pandas as pd
import pytest
from test_health import H200, copy_of

from gpubench.harness.records.results import ResultsFull
from gpubench.harness.records.store import results_dir_for
from gpubench.harness.core.exits import UsageError
from gpubench.reports.judge import health
from gpubench.reports.render import health as health_report
from gpubench.reports.judge.aggregate import per_case
from gpubench.reports.render.build import build_report
from gpubench.reports.judge.load import load_results, machine_labels, write_merged
from gpubench.reports.judge.references import load_references

# These tests read the report's notes, history sections and files, not its pixels
# (conftest.unrendered_plots).
pytestmark = pytest.mark.usefixtures("unrendered_plots")

IDENTITY = {
    "hostname": "node07",
    "cpu_model": "Xeon",
    "cpu_cores": 64,
    "ram_gib": 512,
    "gpus": "NVIDIA H200",
}


@pytest.fixture(scope="module")
def h200() -> pd.DataFrame:
    return load_results([H200])


def put(
    store: Path, frame: pd.DataFrame, folder: str, run_id: str, day: str = "2026-11-29"
) -> Path:
    """One run into <store>/<folder>/<run_id>.csv, as `gpubench run --store` lays it out."""
    (store / folder).mkdir(parents=True, exist_ok=True)
    path = store / folder / f"{run_id}.csv"
    write_merged(frame.assign(run_id=run_id, timestamp_utc=f"{day}T12:00:00+00:00"), path)
    return path


def report(store: Path, out: Path) -> str:
    return build_report([store], out, None).read_text(encoding="utf-8")


def read_as_old(folder: Path, *frames: pd.DataFrame) -> pd.DataFrame:
    """`frames` as rows of schema 5 (whose machine_id hashed the kernel and the GPUs a job was
    given), read back by the one reader, labels and all."""
    paths = []
    for number, frame in enumerate(frames):
        paths.append(folder / f"old-{number}.csv")
        write_merged(frame.assign(schema_version=5), paths[-1])
    return load_results(paths)


# History: a machine is its host, machine_id and device


def test_identical_nodes_each_get_their_own_history_plot(h200, tmp_path):
    # a homogeneous fleet: the same hardware on every node, each machine_id its own by its host
    store = tmp_path / "store"
    for host, machine_id, scale in (
        ("node00", "8f9f0ab5b928", 1.0),
        ("node01", "5d1e7a0c3b42", 0.5),
    ):
        for run_id, day in ((f"{host}-r1", "2026-11-29"), (f"{host}-r2", "2026-11-30")):
            put(
                store,
                copy_of(h200, host, machine_id, matmul_bf16=scale),
                f"{host}-1234abcd",
                run_id,
                day,
            )
    text = report(store, tmp_path / "out")
    links = re.findall(r"- \*\*(node0\d) · [^*]+\*\*: !\[[^\]]*\]\(([^)]+)\)", text)
    # never one PNG for both
    assert [host for host, _ in links] == ["node00", "node01"] and len(
        {name for _, name in links}
    ) == 2
    # two runs each, not one
    assert all(f"| {host} · NVIDIA H200 (cuda:0) | 2 |" in text for host in ("node00", "node01"))


def test_hosts_whose_names_collide_in_a_file_name_keep_their_own_plots(h200, tmp_path):
    store = tmp_path / "store"
    # one store folder after safe_name; two hosts in the rows, their machine_ids alike in the 8 hex
    # a file name shows
    for number, (host, machine_id) in enumerate((("a b", "8f9f0ab5b928"), ("a_b", "8f9f0ab5c0de"))):
        for run_id, day in ((f"h{number}-r1", "2026-11-29"), (f"h{number}-r2", "2026-11-30")):
            put(store, copy_of(h200, host, machine_id), "a_b-1234abcd", run_id, day)
    text = report(store, tmp_path / "out")
    names = re.findall(r"\]\((history_[^)]+\.png)\)", text)
    assert (
        len(names) == 2
        and len(set(names)) == 2
        and all((tmp_path / "out" / n).is_file() for n in names)
    )


# Health: a machine with several runs is judged on its latest


def test_health_judges_a_machines_latest_run_not_the_median_of_its_history(h200, tmp_path):
    runs = [
        copy_of(h200, run_id=f"r{day}").assign(timestamp_utc=f"2026-11-{day:02d}T12:00:00+00:00")
        for day in range(1, 5)
    ]
    runs.append(
        copy_of(h200, run_id="r9", matmul_bf16=0.7).assign(
            timestamp_utc="2026-11-09T12:00:00+00:00"
        )
    )
    # newest first: the order must not decide
    frame = pd.concat(runs[::-1], ignore_index=True)
    frame["machine"] = machine_labels(frame)
    table = health.health_table(frame, per_case(frame), load_references())
    bf16 = table[table["key"] == "matmul_bf16_tflops"].iloc[0]
    assert bf16["ratio"] == pytest.approx(0.7, rel=0.01) and bf16["health"] == "≥10% below"
    assert table[table["key"] == "matmul_fp32_tflops"]["health"].iloc[0] == "ok"


def test_an_unknown_gpu_alone_is_said_to_have_no_reference(h200):
    frame = copy_of(h200).assign(device_name="NVIDIA GB300")
    frame["machine"] = machine_labels(frame)
    text = health_report.render(frame, per_case(frame))
    assert "Not judged. No reference for NVIDIA GB300" in text
    cpu = frame.assign(device="cpu", device_name="AMD EPYC")
    cpu["machine"] = machine_labels(cpu)
    # a CPU never has a reference: nothing to say
    assert health_report.render(cpu, per_case(cpu)) == ""


def test_a_machine_whose_every_row_failed_gets_a_report(h200, tmp_path):
    failed = copy_of(h200).assign(status="failed", reason="RuntimeError: CUDA error")
    failed[["median_s", "tflops", "gbps", "epoch_s", "samples_per_s", "test_accuracy"]] = None
    put(tmp_path / "store", failed, "vm-1234abcd", "r1")
    assert "## Rows not ok" in report(tmp_path / "store", tmp_path / "out")


# Reading a store: what is not a readable run is left out and named, never a refusal or a silence


@pytest.mark.parametrize("stray", ["foreign", "cut", "unreadable"])
def test_a_stray_file_in_a_store_is_left_out_and_named(h200, tmp_path, monkeypatch, capsys, stray):
    store = tmp_path / "store"
    put(store, copy_of(h200), "vm-1234abcd", "r1")
    bad = store / "vm-1234abcd" / "r2.csv"
    if stray == "foreign":
        bad.write_text("a,b\n1,2\n", encoding="utf-8")
    # a run still being written: its last line ends mid-row
    elif stray == "cut":
        bad.write_bytes(put(store, copy_of(h200), "vm-1234abcd", "r2").read_bytes()[:3000])
    else:
        bad.write_bytes(b"")
        # root reads a chmod-000 file: refuse it the way another uid would be refused
        real_open = builtins.open

        def denying(path, *args, **kwargs):
            if Path(path) == bad:
                raise PermissionError(errno.EACCES, "Permission denied", str(path))
            return real_open(path, *args, **kwargs)

        monkeypatch.setattr("gpubench.harness.records.results.open", denying, raising=False)
    text = report(store, tmp_path / "out")
    assert "81 rows from 1 run(s)" in text and f"left out of this report: {bad}" in text
    assert f"left out of this report: {bad}" in capsys.readouterr().err
    # named by the user: still refused
    with pytest.raises(UsageError, match=re.escape(str(bad))):
        load_results([bad])


def test_an_unlistable_machine_folder_is_named_not_silently_missing(h200, tmp_path, monkeypatch):
    store = tmp_path / "store"
    put(store, copy_of(h200), "vm-1234abcd", "r1")
    put(store, copy_of(h200, "other", "0123456789ab"), "other-0123abcd", "r2")
    real_walk = os.walk

    # root lists a chmod-700 folder of another uid: refuse it here
    def walk(top, onerror=None, followlinks=False):
        for root, dirs, names in real_walk(top, followlinks=followlinks):
            if Path(root).name == "other-0123abcd":
                onerror(PermissionError(errno.EACCES, "Permission denied", root))
                continue
            yield root, dirs, names

    monkeypatch.setattr("gpubench.reports.judge.load.os.walk", walk)
    text = report(store, tmp_path / "out")
    assert "other-0123abcd: cannot list the folder (Permission denied)" in text
    # compare has no notes: refused, not silent
    with pytest.raises(UsageError, match="cannot list the folder"):
        load_results([store])


def test_a_folder_linked_in_from_outside_is_named_not_read_and_fleet_logs_are_not(h200, tmp_path):
    store, elsewhere = tmp_path / "store", tmp_path / "elsewhere"
    put(elsewhere, copy_of(h200), "vm-1234abcd", "r1")
    put(store, copy_of(h200, "other", "0123456789ab"), "other-0123abcd", "r2")
    # a report reads only what it is named
    (store / "vm-1234abcd").symlink_to(elsewhere / "vm-1234abcd")
    # a link back up: read once, as itself, no endless walk
    (store / "loop").symlink_to(store)
    (store / ".fleet" / "f1").mkdir(parents=True)
    (store / ".fleet" / "f1" / "log.csv").write_text("x,y\n1,2\n", encoding="utf-8")
    text = report(store, tmp_path / "out").replace("\\_", "_")
    assert "81 rows from 1 run(s)" in text and text.count("left out") == 1
    link = f"{store}/vm-1234abcd: a link to {elsewhere}/vm-1234abcd, outside {store} — not followed"
    assert f"left out of this report: {link}" in text
    # named too: read
    assert "162 rows from 2 run(s)" in report_of([store, elsewhere], tmp_path / "out2")


def report_of(paths: list[Path], out: Path) -> str:
    return build_report(paths, out, None).read_text(encoding="utf-8")


# --store: refused in one line that names --store, before any build


def test_an_empty_store_is_refused_not_ignored(tmp_path):
    with pytest.raises(UsageError, match="--store is empty"):
        results_dir_for("", "results", "results", lambda: IDENTITY)


def test_a_store_under_a_file_is_refused_naming_the_file(tmp_path):
    (tmp_path / "afile").write_text("", encoding="utf-8")
    with pytest.raises(UsageError, match=r"afile is a file, not a folder"):
        results_dir_for(tmp_path / "afile" / "sub", "results", "results", lambda: IDENTITY)


def test_a_linked_machine_folder_is_refused_naming_store(tmp_path):
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "node07-0b3f5b1d").symlink_to(tmp_path)
    # where the name comes from
    folder = results_dir_for(tmp_path / "other", "results", "results", lambda: IDENTITY)
    (tmp_path / "store" / "node07-0b3f5b1d").unlink()
    (tmp_path / "store" / folder.name).symlink_to(tmp_path)
    with pytest.raises(UsageError, match=r"--store .*is a link .*replace the link"):
        results_dir_for(tmp_path / "store", "results", "results", lambda: IDENTITY)


def test_a_store_that_takes_no_files_is_refused_naming_store(tmp_path, monkeypatch):
    # root writes anywhere: stand in for EACCES/EROFS
    monkeypatch.setattr("gpubench.harness.records.store.os.access", lambda path, mode: False)
    with pytest.raises(
        UsageError, match=r"--store .*: cannot write into .* — pass a --store you can write to"
    ):
        results_dir_for(tmp_path / "store", "results", "results", lambda: IDENTITY)


def test_a_full_store_names_store_as_a_way_out(tmp_path):
    assert "--store" in str(ResultsFull(0, tmp_path / "r.csv"))


def test_the_causes_of_a_drop_are_read_in_the_latest_run(h200):
    healthy = [
        copy_of(h200, run_id=f"r{day}").assign(timestamp_utc=f"2026-11-{day:02d}T12:00:00+00:00")
        for day in range(1, 5)
    ]
    slow = copy_of(h200, run_id="r9", matmul=0.7).assign(
        timestamp_utc="2026-11-09T12:00:00+00:00", gpu_sm_clock_mhz=1500.0
    )
    frame = pd.concat([slow, *healthy], ignore_index=True)
    frame["machine"] = machine_labels(frame)
    clock = next(
        line
        for line in health.causes(frame, frame["machine"].iloc[0], load_references(), {})
        if line.startswith("clocks")
    )
    # four healthy runs would have outvoted it
    assert "median 1500 MHz" in clock and "likely cause" in clock


def test_a_store_that_cannot_be_listed_says_so_not_run_first(tmp_path, monkeypatch):
    (tmp_path / "store").mkdir()

    def walk(top, onerror=None, followlinks=False):
        onerror(PermissionError(errno.EACCES, "Permission denied", str(top)))
        yield from ()

    monkeypatch.setattr("gpubench.reports.judge.load.os.walk", walk)
    with pytest.raises(
        UsageError,
        match=r"no results read in .*store: .*cannot list the folder \(Permission denied\)",
    ):
        build_report([tmp_path / "store"], tmp_path / "out", None)


def test_a_gpu_that_fell_off_its_node_in_the_latest_run_is_the_outlier(h200):
    micro = h200[h200["workload"].isin(["matmul", "transfer", "elementwise"])]
    runs = [
        copy_of(
            micro,
            "node1",
            "abcabcabcabc",
            f"cuda:{gpu}",
            f"d{day}-cuda{gpu}",
            **({"matmul": 0.8} if (day, gpu) == (9, 2) else {}),
        ).assign(timestamp_utc=f"2026-11-{day:02d}T12:00:00+00:00")
        for day in (1, 2, 3, 9)
        for gpu in range(4)
    ]
    # four `--device cuda:all` runs of one node; GPU 2 slowed in the last
    frame = pd.concat(runs, ignore_index=True)
    frame["machine"] = machine_labels(frame)
    table = health.outlier_table(frame, per_case(frame))
    assert set(table[table["gpu"] != "ok"]["device"]) == {"cuda:2"}


def test_a_host_without_a_name_keeps_its_history(h200, tmp_path):
    # socket.gethostname() == "": the store folder is host-<hash>, the rows' hostname empty
    store = tmp_path / "store"
    for run_id, day in (("r1", "2026-11-29"), ("r2", "2026-11-30")):
        put(store, copy_of(h200, ""), "host-1234abcd", run_id, day)
    text = report(store, tmp_path / "out")
    assert "None yet" not in text and re.search(r"\]\((history__8f9f0ab5_cuda_0\.png)\)", text)


def test_a_host_name_that_is_not_utf8_is_written_as_text(monkeypatch):
    from gpubench.harness.devices import env

    # what Python gives for those bytes
    monkeypatch.setattr(env.socket, "gethostname", lambda: os.fsdecode(b"n\xffd"))
    assert env.machine_identity()["hostname"] == "n\\xffd"
    # the CSV writer's encoding: every row would have failed
    assert env.host_name().encode("utf-8") == b"n\\xffd"


def test_a_kernel_update_or_another_gpu_allocation_keeps_one_history(h200, tmp_path):
    # one store folder; an older gpubench's machine_id hashed the kernel release and the GPUs the
    # job saw
    store = tmp_path / "store"
    put(
        store,
        copy_of(h200, "vm", "8f9f0ab5b928").assign(os="Linux 6.18.44", schema_version=5),
        "vm-1234abcd",
        "r1",
        "2026-11-01",
    )
    put(
        store,
        copy_of(h200, "vm", "0a1b2c3d4e5f").assign(os="Linux 6.19.2", schema_version=5),
        "vm-1234abcd",
        "r2",
        "2026-12-01",
    )
    text = report(store, tmp_path / "out")
    assert "None yet" not in text and re.search(
        r"\| vm · NVIDIA H200 \(cuda:0\) \| 2 \| 2026-11-01 → 2026-12-01 \|", text
    )


def test_a_machine_fixed_before_a_kernel_update_is_judged_on_its_run_after_it(h200, tmp_path):
    slow = copy_of(h200, "vm", "8f9f0ab5b928", run_id="r1", matmul_bf16=0.7).assign(
        timestamp_utc="2026-11-01T12:00:00+00:00"
    )
    # a new kernel: a new machine_id, as an older gpubench wrote it
    fixed = copy_of(h200, "vm", "0a1b2c3d4e5f", run_id="r2").assign(
        timestamp_utc="2026-12-01T12:00:00+00:00"
    )
    frame = read_as_old(tmp_path, fixed, slow)
    # one host, one hardware, one GPU
    frame["machine"] = machine_labels(frame)
    table = health.health_table(frame, per_case(frame), load_references())
    # one machine, named as its latest run
    assert set(table["machine"]) == set(frame.loc[frame["run_id"] == "r2", "machine"])
    assert (table["health"] == "ok").all() and "Causes to check" not in health_report.render(
        frame, per_case(frame)
    )


def only_transfers(frame: pd.DataFrame) -> pd.DataFrame:
    # `gpubench run -k transfer`
    return frame[frame["workload"] == "transfer"]


def matmul_failed(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.copy()
    matmul = out["workload"] == "matmul"
    (
        out.loc[matmul, "status"],
        out.loc[matmul, "reason"],
        out.loc[matmul, ["tflops", "median_s"]],
    ) = ("failed", "RuntimeError: CUDA error", None)
    return out


@pytest.mark.parametrize("newest", [only_transfers, matmul_failed])
# the second: a kernel update between the runs, another machine_id as an older gpubench wrote it
@pytest.mark.parametrize("machine_id", ["8f9f0ab5b928", "0a1b2c3d4e5f"])
def test_a_figure_from_an_earlier_run_is_said_so_and_its_causes_are_read_in_that_run(
    h200, newest, machine_id, tmp_path
):
    slow = copy_of(h200, run_id="r1", matmul=0.7).assign(
        timestamp_utc="2026-11-01T12:00:00+00:00", gpu_sm_clock_mhz=1500.0
    )
    later = newest(
        copy_of(h200, machine_id=machine_id, run_id="r2").assign(
            timestamp_utc="2026-11-02T12:00:00+00:00", gpu_sm_clock_mhz=1980.0
        )
    )
    frame = read_as_old(tmp_path, later, slow)
    frame["machine"] = machine_labels(frame)
    table = health.health_table(frame, per_case(frame), load_references()).set_index("key")
    assert (
        table.loc["matmul_bf16_tflops", "health"] == "≥10% below"
        and table.loc["matmul_bf16_tflops", "run"] == "from run r1 of 2026-11-01"
    )
    # measured in the machine's latest run: nothing to say
    assert table.loc["h2d_pinned_gbps", "run"] == ""
    flagged = health_report.render(frame, per_case(frame)).split("Causes to check", 1)[1]
    clock = next(line for line in flagged.splitlines() if "clocks:" in line)
    # r1's clocks, the run whose matmul is flagged
    assert "median 1500 MHz" in clock and "likely cause" in clock
