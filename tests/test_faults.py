"""Faults a long benchmark run meets: a full results disk, memory running out, more processes
than the machine holds, a dead or hung DDP rank, bad run ids and damaged datasets. Each is one
clear line naming the fix, and nothing already measured is lost."""

from __future__ import annotations

import errno
import os
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch

from fakes import FakeBenchmark
from harness.results import ResultsFull, ResultsWriter, read_rows, write_sidecar
from harness.schema import SCHEMA_VERSION

pytest_plugins = ["pytester"]
CPU = torch.device("cpu")


def row(case_id: str, **extra):
    return dict({"schema_version": SCHEMA_VERSION, "run_id": "r", "workload": "matmul", "case_id": case_id,
                 "median_s": 0.125, "status": "ok", "reason": "a, quoted; reason", "samples_s": [0.125, 0.25]}, **extra)


def full_disk_after_half(monkeypatch) -> None:
    """Every os.write puts half its bytes on disk, then fails as a full disk does."""
    real_write = os.write

    def write(fd: int, data) -> int:
        real_write(fd, bytes(data[: max(1, len(data) // 2)]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", write)


# --- 1. the results folder fills up -------------------------------------------------------------

@pytest.mark.parametrize("failing", ["write", "fsync"])
def test_a_full_disk_leaves_only_whole_rows_and_says_how_many(tmp_path, monkeypatch, failing):
    writer = ResultsWriter(tmp_path, "full")
    writer.append(row("a"))
    writer.append(row("b"))
    if failing == "write":
        full_disk_after_half(monkeypatch)
    else:  # the data reached the page cache; the disk refuses it at fsync (delayed allocation, NFS)
        monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space left on device")))
    with pytest.raises(ResultsFull) as caught:
        writer.append(row("c", reason="x" * 5000))
    monkeypatch.undo()
    message = str(caught.value)
    assert message.startswith(f"results folder full: 2 rows kept in {tmp_path / 'full.csv'}") and "\n" not in message
    assert "--results-dir" in message and caught.value.errno == errno.ENOSPC and isinstance(caught.value, OSError)
    assert [r["case_id"] for r in read_rows(tmp_path / "full.csv")] == ["a", "b"]  # no cut third row
    writer.append(row("d"))  # space freed: the run's file goes on whole
    writer.close()
    assert [r["case_id"] for r in read_rows(tmp_path / "full.csv")] == ["a", "b", "d"]


def test_a_later_build_process_counts_the_rows_already_in_the_file(tmp_path, monkeypatch):
    first = ResultsWriter(tmp_path, "run")
    first.append(row("a"))
    first.append(row("b"))
    first.close()
    later = ResultsWriter(tmp_path, "run", resume=True)
    full_disk_after_half(monkeypatch)
    with pytest.raises(ResultsFull, match="results folder full: 2 rows kept in"):
        later.append(row("c"))
    monkeypatch.undo()
    later.close()
    assert [r["case_id"] for r in read_rows(tmp_path / "run.csv")] == ["a", "b"]


def test_a_disk_full_before_the_header_leaves_no_file(tmp_path, monkeypatch):
    full_disk_after_half(monkeypatch)
    with pytest.raises(ResultsFull, match="results folder full: 0 rows kept"):
        ResultsWriter(tmp_path, "empty")
    monkeypatch.undo()
    assert not (tmp_path / "empty.csv").exists()


def test_a_sidecar_is_never_half_written(tmp_path, monkeypatch):
    writer = ResultsWriter(tmp_path, "run")
    writer.append(row("a"))
    write_sidecar(tmp_path, "run", "ops", {"case": [1, 2, 3]})
    full_disk_after_half(monkeypatch)
    with pytest.raises(ResultsFull, match=r"results folder full: 1 rows kept in .*run\.csv; run\.ops\.json not written"):
        write_sidecar(tmp_path, "run", "ops", {"case": list(range(10_000))})
    monkeypatch.undo()
    writer.close()
    assert (tmp_path / "run.ops.json").read_text() == '{\n  "case": [\n    1,\n    2,\n    3\n  ]\n}\n'  # the previous version, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.csv", "run.ops.json"]  # no temporary file left


# --- 2. out of memory on the CPU ------------------------------------------------------------------

def test_cpu_out_of_memory_is_an_oom_row(tmp_path):
    from harness.device import is_out_of_memory
    from harness.runner import BuildContext, RunContext, run_case
    from harness.timing import SyncedClock
    from harness.workloads.matmul import MatmulCase

    message = "[enforce fail at alloc_cpu.cpp:119] data. DefaultCPUAllocator: can't allocate memory: you tried to allocate 1099511627776 bytes. Error code 12 (Cannot allocate memory)"
    assert is_out_of_memory(RuntimeError(message))
    assert is_out_of_memory(MemoryError())
    assert not is_out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))

    class Huge:
        @staticmethod
        def build(case, ctx):
            raise RuntimeError(message)

    writer = ResultsWriter(tmp_path, "run")
    row_out = run_case(MatmulCase("fp32", 64), Huge, FakeBenchmark(), RunContext(BuildContext(CPU, "smoke", SyncedClock(CPU)), {"schema_version": 2}, writer))
    writer.close()
    assert row_out["status"] == "oom" and "can't allocate memory" in row_out["reason"]


def test_a_real_cpu_allocation_failure_is_recognised():
    from harness.device import is_out_of_memory

    with pytest.raises(RuntimeError) as caught:
        torch.empty(2**62, dtype=torch.uint8)  # 4 EiB: no machine's allocator can grant it
    assert is_out_of_memory(caught.value), str(caught.value)


# --- 3. more CPU processes than the machine holds ---------------------------------------------------

def test_cpu_nproc_beyond_cores_or_memory_is_refused_before_launch(monkeypatch):
    from harness.workloads import ddp
    from harness.workloads.ddp import NprocError, check_nproc, default_nproc

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(ddp, "available_memory_bytes", lambda: 4_000_000_000)
    with pytest.raises(NprocError, match=r"--nproc 9 is more than 4 processes per core on this 2-core machine — use --nproc 8 or fewer"):
        check_nproc(9, CPU)
    with pytest.raises(NprocError, match=r"--nproc 3 needs about 4\.5 GB \(1\.5 GB per process\) but 4\.0 GB is available — use --nproc 2 or fewer"):
        check_nproc(3, CPU)
    with pytest.raises(NprocError, match="positive"):
        check_nproc(0, CPU)
    assert check_nproc(2, CPU) == 2
    monkeypatch.setattr(ddp, "available_memory_bytes", lambda: 2_000_000_000)
    assert default_nproc(CPU) == 1 and check_nproc(default_nproc(CPU), CPU) == 1  # the default is never refused


# --- 4. a DDP rank dies or hangs ------------------------------------------------------------------

def launch_marked(tmp_path: Path):
    """A two-rank torchrun command whose ranks carry tmp_path in their command line (to find them)."""
    from harness.workloads.data_source import DataSource
    from harness.workloads.ddp import DistributedCase, torchrun_command

    case = DistributedCase("ddp", 2, "gloo", 16)
    return torchrun_command(case, CPU, DataSource("synthetic", tmp_path), max_steps=2, result_json=tmp_path / "r.json")


def processes_of(tmp_path: Path) -> list[psutil.Process]:
    """Live processes started for this test (torchrun and its ranks name tmp_path)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and any(str(tmp_path) in arg for arg in proc.info["cmdline"] or ()):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def test_a_rank_killed_by_sigkill_fails_the_case_naming_rank_and_signal(tmp_path, monkeypatch):
    """Through the runner: the failed row says which rank died how, and the workdir is removed."""
    import tempfile

    from harness.runner import BuildContext, RunContext, run_case
    from harness.timing import SyncedClock
    from harness.workloads import ddp
    from harness.workloads.data_source import DataSource
    from harness.workloads.ddp import DistributedCase

    monkeypatch.setenv("GPUBENCH_TEST_DIE_RANK", "1")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the case's gpubench-ddp-* workdir goes here
    source = DataSource("synthetic", tmp_path)
    writer = ResultsWriter(tmp_path, "run")
    bctx = BuildContext(CPU, "smoke", SyncedClock(CPU), 2, data_source=lambda: source)
    with pytest.raises(RuntimeError, match=r"torchrun exited 1: rank 1 exitcode -9 \(SIGKILL") as caught:
        run_case(DistributedCase("ddp", 2, "gloo", 16), ddp, FakeBenchmark(), RunContext(bctx, {"schema_version": 2, "run_id": "r"}, writer))
    writer.close()
    assert "\n" not in str(caught.value)
    (failed,) = read_rows(tmp_path / "run.csv")
    assert failed["status"] == "failed" and "rank 1 exitcode -9 (SIGKILL" in failed["reason"]
    assert not list(tmp_path.glob("gpubench-ddp-*"))  # removed even though the case failed
    assert not processes_of(tmp_path)


def test_a_hung_rank_is_killed_with_the_whole_launch_at_the_timeout(tmp_path, monkeypatch):
    from harness.workloads.ddp import launch

    monkeypatch.setenv("GPUBENCH_TEST_HANG_RANK", "1")
    # The ranks' collective timeout far beyond the launch's: only the launch timeout can end this.
    command = [arg if not arg.startswith("--timeout-s=") else "--timeout-s=600" for arg in launch_marked(tmp_path)]
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"torchrun timed out after 15 s and was killed with its ranks"):
        launch(command, tmp_path / "r.json", timeout_s=15)
    assert time.monotonic() - start < 15 + 20
    deadline = time.monotonic() + 5  # SIGKILL is immediate, but the kernel reaps asynchronously
    while processes_of(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not processes_of(tmp_path), "a rank survived the launch timeout"


def test_a_hung_peer_fails_the_waiting_rank_at_the_collective_timeout(tmp_path, monkeypatch):
    """The worker's process-group timeout: rank 0 gives up on the silent rank 1 by itself."""
    from harness.workloads.ddp import launch

    monkeypatch.setenv("GPUBENCH_TEST_HANG_RANK", "1")
    command = [arg if not arg.startswith("--timeout-s=") else "--timeout-s=5" for arg in launch_marked(tmp_path)]
    with pytest.raises(RuntimeError, match=r"torchrun exited 1: rank 0 exitcode 1"):
        launch(command, tmp_path / "r.json", timeout_s=90)


def test_the_root_cause_block_is_quoted():
    from harness.workloads.ddp import rank_error, root_cause

    output = "\n".join([
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        "harness.workloads.ddp_worker FAILED",
        "------------------------------------------------------------",
        "Failures:", "  <NO_OTHER_FAILURES>",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):", "[0]:", "  time      : 2026-11-30_07:50:00", "  host      : h",
        "  rank       : 1 (local_rank: 1)", "  exitcode   : -9 (pid: 1234)", "  error_file: <N/A>",
        "  traceback : Signal 9 (SIGKILL) received by PID 1234"])
    assert root_cause(output).startswith("rank 1 exitcode -9 (SIGKILL")
    assert root_cause(output.replace("-9 (pid", "2 (pid")) == "rank 1 exitcode 2"
    assert root_cause("no block here") == ""
    assert rank_error(output) == "no error line in the ranks' output"


def test_stale_workdirs_are_swept_fresh_ones_kept(tmp_path):
    from harness.workloads.ddp import STALE_WORKDIR_S, sweep_stale_workdirs

    old, fresh, other = tmp_path / "gpubench-ddp-old", tmp_path / "gpubench-ddp-fresh", tmp_path / "someone-else"
    for folder in (old, fresh, other):
        folder.mkdir()
        (folder / "rank0.json").write_text("{}")
    long_ago = time.time() - STALE_WORKDIR_S - 60
    for folder in (old, other):
        os.utime(folder, (long_ago, long_ago))
    sweep_stale_workdirs(folder=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpubench-ddp-fresh", "someone-else"]


def test_a_build_that_fails_before_its_timed_leaves_no_workdir(tmp_path, monkeypatch):
    import tempfile

    from harness.datasets import DatasetError
    from harness.runner import BuildContext
    from harness.timing import SyncedClock
    from harness.workloads import ddp
    from harness.workloads.ddp import DistributedCase

    class Missing:
        root = tmp_path

        @property
        def dataset(self) -> str:
            raise DatasetError("MNIST not found")

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(DatasetError):
        ddp.build(DistributedCase("ddp", 2, "gloo", 16), BuildContext(CPU, "smoke", SyncedClock(CPU), 2, data_source=lambda: Missing()))
    assert not list(tmp_path.glob("gpubench-ddp-*"))


def test_the_launch_timeout_scales_with_the_profile(tmp_path, monkeypatch):
    from harness.runner import BuildContext
    from harness.timing import SyncedClock
    from harness.workloads import ddp
    from harness.workloads.data_source import DataSource
    from harness.workloads.ddp import DistributedCase

    import tempfile

    assert ddp.LAUNCH_TIMEOUT_S == {"smoke": 120, "quick": 600, "full": 3600}
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    launched = []
    monkeypatch.setattr(ddp, "launch", lambda command, result_json, timeout_s: launched.append((command, timeout_s)))
    source = DataSource("synthetic", tmp_path)
    timed = ddp.build(DistributedCase("ddp", 1, "gloo", 16), BuildContext(CPU, "quick", SyncedClock(CPU), 1, data_source=lambda: source))
    try:
        timed.fn()
    finally:
        timed.cleanup()
    ((command, timeout_s),) = launched
    assert timeout_s == 600 and "--timeout-s=300" in command


# --- 5. checked before the first case ---------------------------------------------------------------

TINY_BENCH = '''
import sys
from dataclasses import dataclass
from typing import ClassVar

from harness.cases import Case
from harness.runner import Timed

gpubench_workload = sys.modules[__name__]


@dataclass(frozen=True)
class TinyCase(Case):
    workload: ClassVar[str] = "matmul"
    size: int


def cases(ctx):
    return [TinyCase(8)]


def build(case, ctx):
    return Timed(fn=lambda: None)


def test_tiny(case, gpubench):
    gpubench.run(case)
'''


@pytest.fixture
def tiny(pytester, monkeypatch):
    monkeypatch.setenv("GPUBENCH_DOWNLOAD", "0")
    pytester.makepyfile(bench_tiny=TINY_BENCH)
    (pytester.path / "out").mkdir()
    (pytester.path / "out" / "taken.csv").write_text("an earlier run\n")
    return pytester


def run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "harness.plugin", "-p", "no:cacheprovider", "bench_tiny.py", "--benchmark-only",
                                         "--profile=smoke", "--results-dir=out", *args)


def one_error_line(result) -> str:
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert result.ret == 4 and len(errors) == 1, result.stderr.str()
    assert "Traceback" not in result.stderr.str()
    return errors[0]


@pytest.mark.parametrize("args, message", [
    (["--run-id=taken"], "--run-id 'taken' already exists"),
    (["--run-id=" + "x" * 121], "--run-id is 121 characters: use 1 to 120"),
    (["--run-id=../x"], "must be a plain file name inside --results-dir"),
    (["--run-id=a/b"], "must be a plain file name inside --results-dir"),
    (["--nproc=1000"], "processes per core"),
])
def test_a_bad_run_is_refused_before_any_case_with_one_line(tiny, args, message):
    before = sorted(p.name for p in (tiny.path / "out").iterdir())
    assert message in one_error_line(run(tiny, *args))
    assert sorted(p.name for p in (tiny.path / "out").iterdir()) == before  # nothing written
    assert not (tiny.path / "x.csv").exists()


def test_a_later_build_may_append_to_its_runs_existing_file(tiny):
    from harness.schema import COLUMNS

    (tiny.path / "out" / "taken.csv").write_text(",".join(COLUMNS) + "\r\n")
    assert run(tiny, "--run-id=taken", "--gpubench-build=0").ret == 4  # the first build process starts the file: refused
    assert run(tiny, "--run-id=taken", "--gpubench-build=1").ret == 5  # accepted; the tiny case has no build 1


def idx_bytes(dims: tuple[int, ...]) -> bytes:
    header = bytes([0, 0, 0x08, len(dims)]) + b"".join(d.to_bytes(4, "big") for d in dims)
    return header + bytes(int(torch.tensor(dims).prod()))


def write_idx_folder(folder: Path, cut: str | None = None, bad_magic: str | None = None, bad_label: str | None = None) -> None:
    """Four small, valid IDX files (2 train + 1 test image), one of them damaged on request."""
    folder.mkdir(parents=True)
    for name, dims in (("train-images-idx3-ubyte", (2, 28, 28)), ("train-labels-idx1-ubyte", (2,)),
                       ("t10k-images-idx3-ubyte", (1, 28, 28)), ("t10k-labels-idx1-ubyte", (1,))):
        data = idx_bytes(dims)
        if name == cut:
            data = data[: len(data) - 100]
        if name == bad_magic:
            data = b"<html>" + data[6:]
        if name == bad_label:  # the last label byte: 200 in a 10-class dataset
            data = data[:-1] + bytes([200])
        (folder / name).write_bytes(data)


def test_a_truncated_fashion_mnist_file_is_named_with_the_fix(tiny):
    raw = tiny.path / "data" / "FashionMNIST" / "raw"
    write_idx_folder(raw, cut="train-images-idx3-ubyte")
    line = one_error_line(run(tiny, "--dataset=fashion-mnist", "--data-root=data"))
    assert "train-images-idx3-ubyte is truncated: 1484 bytes where its header (2x28x28) says 1584" in line
    assert "delete it and gpubench re-extracts it from /usr/share/datasets/fashion-mnist" in line
    assert [p.name for p in (tiny.path / "out").iterdir()] == ["taken.csv"]  # nothing written


def test_a_corrupt_mnist_file_is_named_with_the_fix(tiny):
    write_idx_folder(tiny.path / "data" / "MNIST" / "raw", bad_magic="t10k-labels-idx1-ubyte")
    line = one_error_line(run(tiny, "--dataset=mnist", "--data-root=data"))
    assert "t10k-labels-idx1-ubyte is not an IDX file (bad magic number)" in line and "re-download MNIST" in line


def test_out_of_range_labels_are_named_with_the_fix_before_any_case(tiny):
    """A damaged label byte would otherwise fail the first training step with an index error."""
    write_idx_folder(tiny.path / "data" / "FashionMNIST" / "raw", bad_label="train-labels-idx1-ubyte")
    line = one_error_line(run(tiny, "--dataset=fashion-mnist", "--data-root=data"))
    assert "train-labels-idx1-ubyte holds 1 label(s) outside 0..9 (the first: 200 at item 1)" in line
    assert "delete it and gpubench re-extracts it" in line
    assert [p.name for p in (tiny.path / "out").iterdir()] == ["taken.csv"]  # nothing written


def test_whole_idx_files_pass(tmp_path):
    from harness.datasets import check_dataset_files

    write_idx_folder(tmp_path / "MNIST" / "raw")
    check_dataset_files("mnist", tmp_path)
    check_dataset_files("auto", tmp_path)  # auto reads MNIST here: checked, and whole


def test_an_unwritable_data_root_falls_back_to_a_temporary_folder_with_one_warning(tiny, monkeypatch):
    (tiny.path / "blocker").write_text("")  # a file: nothing can be created below it, not even by root
    monkeypatch.setenv("TMPDIR", str(tiny.path / "tmp"))
    (tiny.path / "tmp").mkdir()
    result = run(tiny, "--dataset=fashion-mnist", "--data-root=blocker/data")
    assert result.ret == 0, result.stderr.str()
    warnings = [line for line in result.stderr.lines + result.stdout.lines if "WARNING: data root" in line]
    assert len(warnings) == 1 and f"using {tiny.path / 'tmp'}" in warnings[0] and "--data-root" in warnings[0]


def test_no_writable_data_root_at_all_is_one_error(tmp_path, monkeypatch):
    import tempfile

    from harness.datasets import DatasetError, usable_data_root

    (tmp_path / "blocker").write_text("")
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path / "blocker"))
    with pytest.raises(DatasetError, match=r"data root .* is not writable, nor is .* — pass --data-root DIR with a writable folder"):
        usable_data_root(tmp_path / "blocker" / "data", "mnist")
    assert usable_data_root(tmp_path / "blocker" / "data", "synthetic") == (tmp_path / "blocker" / "data", None)  # needs no files


def test_ctrl_c_during_report_is_one_line_and_leaves_no_report_md(tmp_path, capsys, monkeypatch):
    """Interrupted while rendering: exit 130, one line, and the folder has no report.md (an older
    one is removed first), so it never looks complete."""
    from pathlib import Path

    from harness.cli import main
    from reports import build

    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").write_text("an older report")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(build, "render_report", interrupted)
    golden = Path(__file__).parent / "data" / "golden_laptop.csv"
    assert main(["report", str(golden), "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "interrupted" in err and "incomplete" in err
    assert not (out / "report.md").exists()


# ---- the second fault campaign --------------------------------------------------------------

def _write_one_row(tmp_path, **cells):
    import csv as csv_module

    from harness.schema import COLUMNS, SCHEMA_VERSION

    row = dict({"schema_version": SCHEMA_VERSION, "run_id": "r", "workload": "matmul", "case_id": "matmul/fp32-n64", "status": "ok",
                "median_s": "0.001", "samples_s": "[0.001, 0.001]"}, **cells)
    path = tmp_path / "damaged.csv"
    with open(path, "w", newline="") as handle:
        writer = csv_module.DictWriter(handle, fieldnames=COLUMNS, restval="")
        writer.writeheader()
        writer.writerow(row)
    return path


@pytest.mark.parametrize("cells", [{"median_s": "inf"}, {"median_s": "-1"}, {"samples_s": "[1,2,"}, {"samples_s": "hello"},
                                   {"samples_s": "[-1e-5]"}, {"status": "weird"}, {"case_id": ""}, {"size": "64.5"}, {"build": "-3"},
                                   {"timestamp_utc": "yesterday"}, {"timestamp_utc": "2026-13-45T99:00:00"}, {"run_id": ""}])
def test_damaged_values_are_refused_by_both_readers(tmp_path, cells):
    from harness.results import read_rows
    from harness.schema import SchemaError
    from reports.load import ReportError, load_results

    path = _write_one_row(tmp_path, **cells)
    with pytest.raises(SchemaError, match="line 2: column"):
        read_rows(path)
    with pytest.raises(ReportError, match="line 2: column"):
        load_results([path])


def test_a_file_cut_inside_its_last_quoted_field_is_refused(tmp_path):
    from reports.load import ReportError, load_results

    path = _write_one_row(tmp_path, samples_s="[0.001, 0.002, 0.003]")
    text = path.read_text()
    path.write_text(text[: text.rindex("0.002")])  # inside the quotes, no newline at the end
    with pytest.raises(ReportError, match="line 2 is truncated"):
        load_results([path])


def test_things_named_csv_that_are_not_files_are_skipped(tmp_path):
    import os

    from reports.load import result_files

    good = _write_one_row(tmp_path)
    (tmp_path / "folder.csv").mkdir()
    (tmp_path / "dangling.csv").symlink_to(tmp_path / "nowhere")
    os.mkfifo(tmp_path / "pipe.csv")  # reading it would hang the report
    assert result_files([tmp_path]) == [good]


@pytest.mark.parametrize("text", ["5", "1", "0", "-5%"])
def test_an_ambiguous_or_empty_threshold_is_refused(text):
    from reports.compare import parse_threshold
    from reports.load import ReportError

    with pytest.raises(ReportError, match="bad --threshold"):
        parse_threshold(text)


def test_sigterm_to_gpubench_run_stops_its_build_process_too(tmp_path):
    """The build process dies with gpubench run: nothing goes on appending rows after it."""
    import signal
    import subprocess
    import sys
    import time

    import psutil

    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "--device", "cpu", "--profile", "smoke", "-k", "matmul or elementwise or inference",
                             "--results-dir", str(tmp_path), "--run-id", "term", "--no-report"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline and not psutil.Process(proc.pid).children():
        time.sleep(0.2)
    children = psutil.Process(proc.pid).children(recursive=True)
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err[-2000:]
    assert "interrupted:" in err and "rows kept in" in err
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert not alive


@pytest.mark.parametrize("run_id", ["", "a\nb"])
def test_an_empty_or_control_character_run_id_is_refused(tmp_path, run_id):
    from harness.results import RunIdError, check_run_id

    with pytest.raises(RunIdError, match="--run-id"):
        check_run_id(run_id, tmp_path)


def test_a_bad_benchmark_timer_and_an_empty_selection_are_one_line(tmp_path):
    import subprocess
    import sys

    bad = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--device", "cpu", "--profile", "smoke", "-k", "matmul",
                          "--results-dir", str(tmp_path), "--benchmark-timer", "nosuch.timer"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 4 and "Traceback" not in bad.stderr and "cannot be loaded" in bad.stderr
    empty = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--device", "cpu", "--profile", "smoke", "-k", "nosuchcase",
                            "--results-dir", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert empty.returncode == 5 and "no case matched the selection" in empty.stderr


# ---- the third fault campaign --------------------------------------------------------------

REPO = Path(__file__).resolve().parent.parent


def gpubench_run(tmp_path: Path, *args: str, **popen) -> "subprocess.Popen[str]":
    import subprocess
    import sys

    return subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "--device", "cpu", "--profile", "smoke", "--results-dir", str(tmp_path / "res"), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, **popen)


def _cmdlines(procs: list[psutil.Process]) -> list[str]:
    lines = []
    for proc in procs:
        try:
            lines.append(" ".join(proc.cmdline()))
        except psutil.Error:
            continue  # gone or a zombie meanwhile
    return lines


def test_sigterm_to_the_group_during_a_ddp_case_unwinds_it(tmp_path):
    """SIGTERM to gpubench run's whole process group while torchrun runs (a job scheduler stopping
    the job): one line, exit 143, the finished row whole, no torchrun or rank left, and the case's
    workdir removed (the build process unwinds the case instead of dying mid-case)."""
    import signal

    (tmp_path / "tmp").mkdir()
    proc = gpubench_run(tmp_path, "--nproc", "2", "--dataset", "synthetic", "-k", "ddp-x1 or ddp-x2", "--run-id", "term", "--no-report",
                        start_new_session=True, env=dict(os.environ, TMPDIR=str(tmp_path / "tmp")))  # the case's gpubench-ddp-* workdir goes there
    csv_path = tmp_path / "res" / "term.csv"
    deadline, tree = time.monotonic() + 120, []
    while time.monotonic() < deadline and proc.poll() is None:  # the x1 row written, the x2 launch running
        tree = psutil.Process(proc.pid).children(recursive=True)
        if csv_path.exists() and len(read_rows(csv_path)) == 1 and any("--nproc_per_node=2" in line for line in _cmdlines(tree)):
            break
        time.sleep(0.2)
    else:
        pytest.fail(f"the x2 launch never started: {proc.communicate()[1][-2000:]}")
    time.sleep(1.5)  # the ranks are up
    tree = psutil.Process(proc.pid).children(recursive=True)
    os.killpg(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 143, err[-2000:]
    assert err.strip().splitlines() == [f"gpubench: interrupted: 1 rows kept in {csv_path} (each whole); re-run with another --run-id for the rest"]
    assert "Traceback" not in out + err
    assert [(r["case_id"], r["status"]) for r in read_rows(csv_path)] == [("ddp/ddp-x1-gloo-bs128", "ok")]
    gone, alive = psutil.wait_procs(tree, timeout=15)
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE], _cmdlines(alive)
    assert not processes_of(tmp_path)  # torchrun and the ranks name the workdir in their command lines
    assert not list((tmp_path / "tmp").glob("gpubench-*"))


@pytest.mark.parametrize("path, message", [("nodir/out.json", "the folder nodir does not exist"), ("out", "is a folder")])
def test_an_unwritable_benchmark_json_is_refused_before_any_case(tiny, path, message):
    """pytest-benchmark writes it only after the whole run: a traceback then, after all the measuring."""
    line = one_error_line(run(tiny, f"--benchmark-json={path}"))
    assert f"--benchmark-json {path}" in line and message in line and "pass --benchmark-json with a file in a writable folder" in line
    assert [p.name for p in (tiny.path / "out").iterdir()] == ["taken.csv"]  # nothing written


@pytest.mark.parametrize("results_dir", ["blocker/sub", "blocker"])
def test_a_bad_results_folder_is_one_line_before_pytests_header(tiny, results_dir):
    (tiny.path / "blocker").write_text("")  # a file where a folder should be
    result = run(tiny, f"--results-dir={results_dir}")
    assert "is not writable" in one_error_line(result) and "--results-dir DIR" in one_error_line(result)
    assert "test session starts" not in result.stdout.str()  # before anything else, like the other pre-checks
    assert (tiny.path / "blocker").read_text() == "" and sorted(p.name for p in tiny.path.iterdir() if p.name.startswith(".gpubench")) == []


def test_gpubench_run_refuses_an_empty_run_id_like_pytest(tmp_path):
    proc = gpubench_run(tmp_path, "-k", "matmul", "--run-id", "")
    out, err = proc.communicate(timeout=120)
    errors = [line for line in err.splitlines() if line.strip()]
    assert proc.returncode == 4 and len(errors) == 1 and "--run-id is 0 characters" in errors[0], err
    assert not (tmp_path / "res").exists()


WINDOWED_BENCH = '''
import sys
from dataclasses import dataclass
from typing import ClassVar

from harness.cases import Case
from harness.runner import Timed
from harness.timing import RoundPlan

gpubench_workload = sys.modules[__name__]
BUILDS = {"smoke": 1, "quick": 1, "full": 1}


@dataclass(frozen=True)
class StepsCase(Case):
    workload: ClassVar[str] = "ddp"
    world_size: int


def cases(ctx):
    return [StepsCase(2)]


def build(case, ctx):
    """Like DDP: one timed call (a launch) whose result carries its own per-step samples."""
    return Timed(fn=lambda: [0.5, 0.25, 0.125], plan=RoundPlan(0, 1, 1, 0.0), windows=lambda steps: steps)


def test_steps(case, gpubench):
    gpubench.run(case)
'''


def test_pytest_benchmark_shows_the_rows_own_samples(pytester):
    """A workload that reports its own samples (DDP: rank 0's step times) is one timed call for
    pytest-benchmark (the whole torchrun launch); its table and JSON show the row's samples."""
    import json

    pytester.makepyfile(bench_steps=WINDOWED_BENCH)
    result = pytester.runpytest_subprocess("-p", "harness.plugin", "-p", "no:cacheprovider", "bench_steps.py", "--benchmark-only", "--profile=smoke",
                                           "--results-dir=out", "--benchmark-json=bench.json", "--dataset=synthetic")
    assert result.ret == 0, result.stdout.str()[-2000:]
    (row,) = read_rows(next((pytester.path / "out").glob("*.csv")))
    (bench,) = json.loads((pytester.path / "bench.json").read_text())["benchmarks"]
    assert bench["stats"]["data"] == row["samples_s"] == [0.5, 0.25, 0.125]
    assert bench["stats"]["median"] == row["median_s"] == 0.25 and bench["stats"]["rounds"] == 3
    assert "per step" in bench["extra_info"]["samples"]


FULL_AFTER_ONE_ROW = '''
"""Test plugin: the results folder is full once one row is written."""
from harness import results

_append = results.ResultsWriter.append


def append(self, row):
    if self.rows_written >= 1:
        raise results.ResultsFull(self.rows_kept, self.path)
    _append(self, row)


results.ResultsWriter.append = append
'''


def assert_one_full_line(out: str, err: str) -> None:
    """The one results-full line (on stderr, last), and no pytest.exit banner."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("gpubench: results folder full: 1 rows kept in"), err
    assert "results folder full" not in out and not [line for line in out.splitlines() if line.startswith("!")], out[-3000:]


def test_a_full_results_folder_is_one_line_under_pytest(tiny):
    (tiny.path / "fullafter1.py").write_text(FULL_AFTER_ONE_ROW)
    tiny.makepyfile(bench_tiny=TINY_BENCH.replace("return [TinyCase(8)]", "return [TinyCase(8), TinyCase(16), TinyCase(32)]"))
    result = run(tiny, "-p", "fullafter1")
    assert result.ret == 75
    assert_one_full_line(result.stdout.str(), result.stderr.str())
    result.assert_outcomes(passed=1, skipped=1)  # the third case did not run
    (csv_path,) = [p for p in (tiny.path / "out").glob("*.csv") if p.name != "taken.csv"]
    assert len(read_rows(csv_path)) == 1


def test_a_full_results_folder_is_one_line_under_gpubench_run(tmp_path):
    (tmp_path / "fullafter1.py").write_text(FULL_AFTER_ONE_ROW)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    proc = gpubench_run(tmp_path, "-k", "matmul", "--run-id", "full", "-p", "fullafter1", env=env)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 75, err[-2000:]
    assert_one_full_line(out, err)
    assert len(read_rows(tmp_path / "res" / "full.csv")) == 1 and not (tmp_path / "res" / "full-report").exists()


def test_sigterm_under_pytest_unwinds_the_case_and_ends_with_one_line(tiny):
    """SIGTERM inside a case (here the case sends it itself): the case writes no row, the rest do
    not run, exit 143, one line and no interrupt banner or traceback (pytest's interrupt report can
    crash on a frame inside torch)."""
    tiny.makepyfile(bench_tiny=TINY_BENCH.replace("return [TinyCase(8)]", "return [TinyCase(8), TinyCase(16), TinyCase(32)]").replace(
        "return Timed(fn=lambda: None)",
        "import os, signal\n    return Timed(fn=(lambda: os.kill(os.getpid(), signal.SIGTERM)) if case.size == 16 else (lambda: None))"))
    result = run(tiny)
    assert result.ret == 143, result.stdout.str()[-2000:]
    (csv_path,) = [p for p in (tiny.path / "out").glob("*.csv") if p.name != "taken.csv"]
    assert [r["case_id"] for r in read_rows(csv_path)] == ["matmul/n8"]
    lines = [line for line in result.stderr.lines if line.strip()]
    assert lines == [f"gpubench: SIGTERM: 1 rows kept in out/{csv_path.name} (each whole); the case in progress was not recorded"], lines
    assert "Traceback" not in result.stdout.str() and not [line for line in result.outlines if line.startswith("!")]
    result.assert_outcomes(passed=1, skipped=1)


TAKE_RUN_ID_AFTER_CHECK = '''
"""Test plugin: another run creates this run's file after the run-id check, before the first case."""
from pathlib import Path


def pytest_collection_finish(session):
    Path("out", "race.csv").write_text("another run\\n")
'''


def test_a_run_id_taken_by_another_run_meanwhile_is_one_line_without_a_banner(tiny):
    (tiny.path / "takerace.py").write_text(TAKE_RUN_ID_AFTER_CHECK)
    result = run(tiny, "-p", "takerace", "--run-id=race")
    assert result.ret == 4
    lines = [line for line in result.stderr.str().splitlines() if line.strip()]
    assert len(lines) == 1 and "race.csv was created by another run meanwhile — pass another --run-id" in lines[0], result.stderr.str()
    assert not [line for line in result.stdout.str().splitlines() if line.startswith("!")], result.stdout.str()[-2000:]
    assert (tiny.path / "out" / "race.csv").read_text() == "another run\n"  # the other run's file is untouched


def test_scratch_folders_of_killed_runs_are_swept_and_live_ones_kept(tmp_path):
    import subprocess

    from harness.lifetime import run_folder_prefix, sweep_dead_run_folders

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout.strip()
    killed = tmp_path / f"{run_folder_prefix(int(dead))}abc"
    live = tmp_path / f"{run_folder_prefix(os.getpid())}def"
    other = tmp_path / "gpubench-run-notapid"
    young = tmp_path / f"{run_folder_prefix(int(dead))}young"  # another pid namespace's live run looks dead: spared while young
    for folder in (killed, live, other, young):
        folder.mkdir()
        (folder / "builds").write_text("4")
    hour_ago = time.time() - 3600
    for folder in (killed, live, other):
        os.utime(folder, (hour_ago, hour_ago))
    assert sweep_dead_run_folders(tmp_path) == [killed]
    assert not killed.exists() and live.exists() and other.exists() and young.exists()
