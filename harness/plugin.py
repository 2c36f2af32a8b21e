"""pytest plugin: gpubench's options, validation before any case, the synced clock installed as
pytest-benchmark's timer, case x build parametrization, and the `gpubench` fixture that records
rows.

A bench module names its workload (`gpubench_workload = matmul`, see harness.runner for the
protocol) and has one test that calls `gpubench.run(case)`. Every case is measured in independent
builds (harness.runner.DEFAULT_BUILDS); the builds of all cases are interleaved — build 0 of every
case, then build 1 of every case — so they sample the whole run's machine state, not one moment.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

import pytest
import torch

from harness.cases import ProfileError, check_profile
from harness.datasets import DatasetError, check_dataset_request, default_data_root
from harness.device import DeviceError, resolve_device
from harness.energy import EnergyMeter, energy_counter, gpu_sampler, idle_power_w
from harness.env import fingerprint, gpu_telemetry
from harness.options import BUILD_COUNT_ENV, RESULTS_FULL_EXIT, RUN_OPTIONS
from harness.results import (ResultsFull, ResultsWriter, check_output_file, check_results_dir_early, check_writable, new_run_id,
                             write_sidecar)
from harness.runner import BuildContext, RunContext, builds_for, run_case, summary_line
from harness.schema import RUN_COLUMNS, SCHEMA_VERSION
from harness.timing import SyncedClock
from harness.workloads.data_source import DataSource
from harness.workloads.ddp import NprocError, check_nproc, default_nproc

STATE = pytest.StashKey["GpubenchState"]()
TERMINATED_EXIT = 128 + signal.SIGTERM  # 143: what a shell reports for a process SIGTERM ended, as gpubench run does


class Terminated(KeyboardInterrupt):
    """SIGTERM while cases run, raised like Ctrl-C's KeyboardInterrupt: the case in progress unwinds
    through its finally blocks (a DDP launch is killed with its ranks, its workdir removed) and
    writes no row, where the default action would kill the process mid-case."""


def _taken_flags(parser: pytest.Parser) -> set[str]:
    """Option strings other plugins already registered (pytest-profiling has --profile)."""
    groups = [*getattr(parser, "_groups", ()), getattr(parser, "_anonymous", None)]
    return {name for group in groups if group is not None for opt in getattr(group, "options", ()) for name in opt.names()}


@pytest.hookimpl(trylast=True)  # after other plugins: a short name they own is left to them
def pytest_addoption(parser: pytest.Parser) -> None:
    """Every option has a namespaced form (`--gpubench-profile`) that cannot collide with another
    plugin, and the short form (`--profile`) unless another plugin already took it."""
    group = parser.getgroup("gpubench")
    taken = _taken_flags(parser)
    for option in RUN_OPTIONS:
        names = [option.namespaced] + ([option.flag] if option.flag not in taken else [])
        group.addoption(*names, **option.kwargs(dest=option.pytest_dest))
    # Internal: `gpubench run` starts one pytest process per build and names the build here.
    group.addoption("--gpubench-build", type=int, default=None, dest="gpubench_build",
                    help="run only build K of each case, appending to the run's CSV (gpubench run: one process per build)")


@dataclass
class GpubenchState:
    """Per-session state; the results file and fingerprint are created on the first case, so a
    pytest run that records nothing writes nothing."""

    ctx: BuildContext
    results_dir: Path
    run_id: str
    data_root: Path
    dataset: str
    profile_ops: bool
    writer: ResultsWriter | None = None
    env: dict[str, Any] = field(default_factory=dict)
    telemetry_start: dict[str, Any] = field(default_factory=dict)
    top_ops: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)  # case_id -> reason, from its first build
    only_build: int | None = None  # this process runs one build of each case (gpubench run)
    untimed_cases: int = 0
    idle_power_w: float | None = None  # measured once before the first case where an energy counter exists
    stop: tuple[str, int] | None = None  # (line, exit code): the results folder filled up, or another run took the run id;
    # the line ends the run and the remaining cases do not run
    terminated: bool = False  # SIGTERM arrived: the run is stopping
    previous_sigterm: Any = None  # restored at unconfigure (pytest may run in-process, as pytester does)
    _data: DataSource | None = None

    @property
    def device(self) -> torch.device:
        return self.ctx.device

    def data(self) -> DataSource:
        if self._data is None:
            self._data = DataSource(self.dataset, self.data_root, self.profile_ops, self.store_top_ops)
        return self._data

    def release_device_data(self) -> None:
        """A dataset left on the device would count in the next case's peak memory."""
        if self._data is not None:
            self._data.release()

    def store_top_ops(self, case_id: str, table: list[dict[str, Any]]) -> str:
        """Profiler tables go in one sidecar beside the CSV; the row names the file."""
        self.top_ops[case_id] = table
        return write_sidecar(self.results_dir, self.run_id, "ops", self.top_ops).name

    def run_context(self, record: bool = True) -> RunContext:
        if not record:  # --benchmark-disable: cases run once, untimed, and nothing is written
            return RunContext(self.ctx, {"run_id": self.run_id, "profile": self.ctx.profile}, None)
        if self.writer is None:
            self.env = fingerprint(self.device)
            self.telemetry_start = gpu_telemetry(self.device.index or 0) if self.device.type == "cuda" else {}
            later_build = bool(self.only_build)
            if not later_build:  # the baseline every energy figure of the run sits on (one second)
                self.idle_power_w = idle_power_w(self.ctx.energy)
            if later_build:  # cases whose first build (an earlier process) was skipped write no row again
                self.skipped.update(skipped_in(self.results_dir / f"{self.run_id}.csv"))
            self.writer = ResultsWriter(self.results_dir, self.run_id, resume=later_build)
        base = {k: v for k, v in self.env.items() if k in RUN_COLUMNS}
        base.update(schema_version=SCHEMA_VERSION, run_id=self.run_id, profile=self.ctx.profile)
        return RunContext(self.ctx, base, self.writer)


def _user_base_clock(config: pytest.Config) -> Any:
    """A --benchmark-timer the user chose stays the host clock underneath the synced one."""
    chosen = str(getattr(config.option, "benchmark_timer", "") or "")
    if chosen in ("", "time.perf_counter", "harness.timing.synced_clock"):
        return time.perf_counter
    from pytest_benchmark.utils import load_timer

    return load_timer(chosen).target


MARKERS = {
    "slow": "long cases: training epochs, distributed runs (deselect with -m 'not slow')",
    "training": "cases that train a model",
    "distributed": "cases that start several processes (DDP, DataParallel)",
    "gpu": "cases that need an accelerator (skipped rows on a CPU-only machine)",
}


@pytest.hookimpl(tryfirst=True)  # before pytest-benchmark's own configure, which would trace back on a bad timer
def pytest_configure(config: pytest.Config) -> None:
    """Validate everything before the first case: a bad value is one line and exit code 4."""
    import sys

    from harness.datasets import check_dataset_files, usable_data_root
    from harness.results import RunIdError, check_run_id

    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    try:
        device = resolve_device(config.getoption("gpubench_device"))
        profile = check_profile(config.getoption("gpubench_profile"))
        results_dir = Path(config.getoption("gpubench_results_dir"))
        if config.getoption("gpubench_run_id") is not None:  # a later build process (--gpubench-build K > 0) appends to its run's file on purpose
            check_run_id(config.getoption("gpubench_run_id"), results_dir, appending=(config.getoption("gpubench_build") or 0) > 0)
        data_root, data_warning = usable_data_root(Path(config.getoption("gpubench_data_root") or default_data_root()), config.getoption("gpubench_dataset"))
        dataset = check_dataset_request(config.getoption("gpubench_dataset"), data_root)
        check_dataset_files(dataset, data_root)
        nproc_option = config.getoption("gpubench_nproc")
        nproc = check_nproc(default_nproc(device) if nproc_option is None else nproc_option, device)
        check_output_files(config, results_dir)
        target_accuracy = check_target_accuracy(config.getoption("gpubench_target_accuracy"))
    except (DeviceError, ProfileError, DatasetError, NprocError, RunIdError, TargetAccuracyError, OSError) as error:
        raise pytest.UsageError(str(error)) from None
    if data_warning:
        sys.stderr.write(f"gpubench: WARNING: {data_warning}\n")
    try:
        clock = SyncedClock(device, _user_base_clock(config))
    except (ImportError, AttributeError) as error:
        raise pytest.UsageError(f"--benchmark-timer cannot be loaded ({error}) — pass a dotted name such as time.perf_counter") from None
    if device.type == "cuda":
        torch.cuda.set_device(device)
    counter, energy_note = energy_counter(device)
    ctx = BuildContext(device, profile, clock, nproc, energy=EnergyMeter(counter, energy_note), telemetry=gpu_sampler(device),
                       target_accuracy=target_accuracy)
    state = GpubenchState(ctx, results_dir, config.getoption("gpubench_run_id") or new_run_id(), data_root, dataset, config.getoption("gpubench_profile_ops"))
    ctx.data_source = state.data
    state.only_build = config.getoption("gpubench_build")
    config.stash[STATE] = state


def check_output_files(config: pytest.Config, results_dir: Path) -> None:
    """Where the run will write, checked before pytest prints its header (OSError: one line). The
    results folder is checked again, and created, once a case will record (collection_finish);
    pytest-benchmark writes --benchmark-json only after the whole run."""
    if not config.getoption("collectonly"):
        check_results_dir_early(results_dir)
    benchmark_json = getattr(config.option, "benchmark_json", None)
    if benchmark_json:
        check_output_file(Path(benchmark_json), "--benchmark-json")


class TargetAccuracyError(ValueError):
    pass


def check_target_accuracy(target: float | None) -> float | None:
    if target is not None and not 0 < target < 1:  # NaN fails this too
        raise TargetAccuracyError(f"--target-accuracy {target} is outside (0, 1) — pass a test accuracy such as 0.85")
    return target


def pytest_sessionstart(session: pytest.Session) -> None:
    """Install the session's synced clock as pytest-benchmark's timer (its session exists by now),
    and SIGTERM as an interrupt that lets the case in progress clean up."""
    state = session.config.stash.get(STATE, None)
    benchmarks = getattr(session.config, "_benchmarksession", None)
    if state is not None and benchmarks is not None:
        from pytest_benchmark.utils import NameWrapper

        benchmarks.options["timer"] = NameWrapper(state.ctx.clock)
    if state is not None:
        _install_sigterm(state)


def _install_sigterm(state: GpubenchState) -> None:
    def terminate(signum: int, frame: Any) -> None:
        if state.terminated:  # a second SIGTERM (the group's, then gpubench run's forwarded one) must not cut the cleanup short
            return
        state.terminated = True
        raise Terminated("SIGTERM: the case in progress was not recorded; the finished rows are whole")

    try:
        state.previous_sigterm = signal.signal(signal.SIGTERM, terminate)
    except ValueError:  # not the main thread (pytest embedded somewhere): keep the default
        pass


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """After the results folder filled up, or SIGTERM, the remaining cases are not run (nor
    reported): the run ends with one line (pytest_unconfigure; gpubench run's own for SIGTERM)
    instead of pytest's interrupt banner."""
    state = item.config.stash.get(STATE, None)
    return True if state is not None and (state.stop or state.terminated) else None


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = session.config.stash.get(STATE, None)
    if state is not None and state.terminated:
        session.exitstatus = TERMINATED_EXIT
    elif state is not None and state.stop:
        session.exitstatus = state.stop[1]  # results full (75) or run id taken (4): gpubench run starts no further build


def pytest_unconfigure(config: pytest.Config) -> None:
    """The results-full line comes last, after pytest's summary, where it is seen."""
    import sys

    state = config.stash.get(STATE, None)
    if state is not None and state.previous_sigterm is not None:
        signal.signal(signal.SIGTERM, state.previous_sigterm)
    if state is not None and state.stop:
        sys.stderr.write(f"gpubench: {state.stop[0]}\n")
    elif state is not None and state.terminated and state.only_build is None:  # under gpubench run, it says so itself
        kept = state.writer.rows_kept if state.writer is not None else 0
        sys.stderr.write(f"gpubench: SIGTERM: {kept} rows kept in {state.results_dir / state.run_id}.csv (each whole); the case in progress was not recorded\n")


def _build_of(item: pytest.Item) -> int:
    return int(getattr(getattr(item, "callspec", None), "params", {}).get("gpubench_build", 0))


@pytest.hookimpl(trylast=True)  # after -k/-m deselection: the build count is the selection's
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Interleave builds: every case's build 0 first, then every case's build 1, ... (stable).
    With --gpubench-build K, only build K of each case runs here (the others are deselected)."""
    state = config.stash.get(STATE, None)
    count_file = os.environ.get(BUILD_COUNT_ENV)
    if count_file:  # tell `gpubench run` how many build processes this selection needs
        Path(count_file).write_text(str(max((_build_of(item) + 1 for item in items), default=0)))
    if state is not None and state.only_build is not None:
        keep = [item for item in items if _build_of(item) == state.only_build]
        dropped = [item for item in items if _build_of(item) != state.only_build]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = keep
    items.sort(key=_build_of)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Check the results folder only when something will be recorded, still before any case."""
    state = session.config.stash.get(STATE, None)
    uses_gpubench = any("gpubench" in getattr(item, "fixturenames", ()) for item in session.items)
    if state is not None and uses_gpubench and not session.config.getoption("collectonly"):
        try:
            check_writable(state.results_dir)
        except OSError as error:
            raise pytest.UsageError(str(error)) from None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize (case, build) from the bench module's `gpubench_workload`."""
    workload: ModuleType | None = getattr(metafunc.module, "gpubench_workload", None)
    if workload is None or "case" not in metafunc.fixturenames:
        return
    state: GpubenchState = metafunc.config.stash[STATE]
    cases = workload.cases(state.ctx)
    untimed = bool(getattr(metafunc.config.option, "benchmark_disable", False))
    builds = 1 if untimed else builds_for(workload, state.ctx.profile)  # untimed: each case once
    # the workload's markers ride on each parameter set, so -m "not slow" sees them before any hook
    marks = [getattr(pytest.mark, name) for name in getattr(workload, "MARKERS", ())]
    params = [pytest.param(case, build, marks=marks, id=case.test_id + (f"-b{build}" if builds > 1 else ""))
              for case in cases for build in range(builds)]
    metafunc.parametrize(("case", "gpubench_build"), params)


@pytest.fixture
def gpubench_build() -> int:
    """Which independent build of the case this test measures (parametrized by the plugin)."""
    return 0


class Recorder:
    """The `gpubench` fixture: runs one build of a case through the harness and records its row."""

    def __init__(self, state: GpubenchState, benchmark: Any, request: pytest.FixtureRequest, build: int) -> None:
        self.state = state
        self.benchmark = benchmark
        self.request = request
        self.build = build

    @property
    def device(self) -> torch.device:
        return self.state.device

    def progress(self, message: str) -> None:
        """A line on the terminal even while pytest captures output (long cases report here)."""
        reporter = self.request.config.pluginmanager.get_plugin("terminalreporter")
        capture = self.request.config.pluginmanager.get_plugin("capturemanager")
        if reporter is None:
            return
        if capture is not None:
            with capture.global_and_fixture_disabled():
                reporter.write_line(f"  gpubench: {message}")
        else:
            reporter.write_line(f"  gpubench: {message}")

    def _step_progress(self, case_id: str) -> Any:
        start = time.monotonic()

        def report(done: int, total: int) -> None:
            spent_s = time.monotonic() - start
            if total:
                eta_s = spent_s / done * (total - done)
                self.progress(f"{case_id}: {done}/{total} steps ({done / total:.0%}), ETA {eta_s:.0f} s")
            else:
                self.progress(f"{case_id}: {done} steps, {spent_s:.0f} s")

        return report

    def _stop_full(self, full: ResultsFull) -> NoReturn:
        """Every row so far is whole; this case is not recorded and the rest do not run."""
        self._stop(str(full), RESULTS_FULL_EXIT, "the results folder is full")

    def _stop(self, line: str, code: int, why: str) -> NoReturn:
        self.state.stop = (line, code)
        pytest.skip(f"not recorded: {why}")

    def run(self, case: Any) -> dict[str, Any]:
        workload = self.request.module.gpubench_workload
        self.benchmark.group = case.workload
        if self.build > 0 and case.case_id in self.state.skipped:
            pytest.skip(self.state.skipped[case.case_id])  # its first build already left the row
        try:
            run = self.state.run_context(record=not self.benchmark.disabled)
        except ResultsFull as full:
            self._stop_full(full)
        except FileExistsError as taken:  # another run with this --run-id started at the same moment
            self._stop(f"{taken.filename} was created by another run meanwhile — pass another --run-id", int(pytest.ExitCode.USAGE_ERROR),
                       "another run took this run id")
        run.build.progress = self._step_progress(case.case_id) if self.request.config.getoption("verbose") > 0 else None
        self.benchmark.extra_info.update({"case_id": case.case_id, "build": self.build, **{k: v for k, v in case.settings().items() if v is not None}})
        try:
            row = run_case(case, workload, self.benchmark, run, self.build)
        except ResultsFull as full:  # the disk is full: every row so far is whole; stop cleanly
            self._stop_full(full)
        except Terminated:  # the case unwound (its finally blocks ran); the rest do not run. Not re-raised: pytest's
            # report of an interrupt walks every frame and can crash on one inside torch (tb_lineno None)
            pytest.skip("not recorded: SIGTERM")
        finally:
            run.build.progress = None
            self.state.release_device_data()
        if self.benchmark.disabled and row["status"] == "ok":
            self.state.untimed_cases += 1
            self.benchmark(lambda: None)  # marks the fixture used (the runner made the untimed call): no warning per case
            return row
        if row["status"] == "ok":
            show_row_samples(self.benchmark, row.get("samples_s") or [])
        if self.request.config.getoption("verbose") > 0 and not self.benchmark.disabled:
            self.progress(summary_line(row))
        if row["status"] == "skipped":
            self.state.skipped[case.case_id] = row["reason"]
            pytest.skip(row["reason"])
        if row["status"] == "oom":
            pytest.skip(f"out of memory: {row['reason']}")
        if row["status"] == "failed":  # e.g. diverged: recorded, and the test says so
            pytest.fail(row["reason"], pytrace=False)
        return row


def show_row_samples(benchmark: Any, samples_s: list[float]) -> None:
    """pytest-benchmark's table and JSON show the row's samples. A workload that reports its own
    (Timed.windows: DDP rank 0's step times, an epoch's windows of steps) is timed by
    pytest-benchmark as one whole call — a torchrun launch, an epoch — which would make the table
    disagree with the CSV's median by orders of magnitude."""
    from pytest_benchmark.stats import Stats

    metadata = getattr(benchmark, "stats", None)
    if metadata is None or not samples_s or list(metadata.stats.data) == list(samples_s):
        return
    shown = Stats()
    for seconds in samples_s:
        shown.update(seconds)
    metadata.stats = shown
    benchmark.extra_info["samples"] = "the workload's own samples (per step), as in the CSV row"


@pytest.fixture
def gpubench(benchmark: Any, request: pytest.FixtureRequest, gpubench_build: int) -> Recorder:
    return Recorder(request.config.stash[STATE], benchmark, request, gpubench_build)


def pytest_report_header(config: pytest.Config) -> list[str]:
    """The run's first lines: the device, and a GPU the driver shows but this torch cannot use."""
    state = config.stash.get(STATE, None)
    if state is None:
        return []
    lines = [f"gpubench: device {state.device}, profile {state.ctx.profile}, results {state.results_dir / state.run_id}.csv"]
    unseen = unusable_gpu(state.device)
    if unseen:
        lines.insert(0, f"gpubench: WARNING: {unseen}")
    if state.ctx.energy.note:  # said once here and in the environment sidecar, never per row
        lines.append(f"gpubench: energy: {state.ctx.energy.note}")
    return lines


def unusable_gpu(device: torch.device) -> str | None:
    """A GPU the machine's driver shows while the suite runs on the CPU: the torch build cannot
    see it (a CPU wheel, a CUDA wheel on ROCm, a driver/runtime mismatch)."""
    import shutil

    if device.type != "cpu":
        return None
    for tool, marker, kind in (("nvidia-smi", "/dev/nvidia0", "an NVIDIA GPU"), ("rocm-smi", "/dev/kfd", "an AMD GPU (ROCm)")):
        if Path(marker).exists() or shutil.which(tool):
            build = f"torch {torch.__version__} (cuda {torch.version.cuda or 'none'}, hip {getattr(torch.version, 'hip', None) or 'none'})"
            return f"this machine shows {kind} but {build} cannot use it — running on the CPU; install the torch build for your GPU"
    return None


def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict[str, Any]) -> None:
    """pytest-benchmark's saved runs carry the device fingerprint, so they can be told apart by GPU."""
    state = config.stash.get(STATE, None)
    if state is not None:
        machine_info["gpubench"] = {k: v for k, v in (state.env or fingerprint(state.device)).items()}


def pytest_benchmark_update_json(config: pytest.Config, benchmarks: Any, output_json: dict[str, Any]) -> None:
    """Serializable params: the case's settings instead of 'UNSERIALIZABLE[MatmulCase(...)]'."""
    for bench in output_json.get("benchmarks", []):
        params = bench.get("params") or {}
        case = params.get("case")
        if hasattr(case, "settings"):
            params["case"] = {"workload": case.workload, "case_id": case.case_id, **case.settings()}


def skipped_in(csv_path: Path) -> dict[str, str]:
    """case_id -> reason for the skipped rows already in a run's file."""
    if not csv_path.exists():
        return {}
    from harness.results import read_rows

    return {row["case_id"]: row["reason"] for row in read_rows(csv_path) if row["status"] == "skipped"}


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is None:
        return
    if state.untimed_cases:
        terminalreporter.write_line(f"gpubench: --benchmark-disable: {state.untimed_cases} case(s) ran once, untimed; nothing was recorded")
    if state.writer is None:
        return
    end = gpu_telemetry(state.device.index or 0) if state.device.type == "cuda" else {}
    if not state.only_build:  # the first build's process describes the run
        try:
            energy = {"source": state.ctx.energy.counter.source if state.ctx.energy.counter else None,
                      "note": state.ctx.energy.note, "idle_power_w": state.idle_power_w}
            write_sidecar(state.results_dir, state.run_id, "env", {"fingerprint": state.env, "gpu_telemetry_start": state.telemetry_start,
                                                                   "gpu_telemetry_end": end, "energy": energy})
        except ResultsFull as full:
            if not state.stop:  # else the run's one line already says it
                terminalreporter.write_line(f"gpubench: {full}")
    state.writer.close()
    terminalreporter.write_line(f"gpubench: {state.writer.rows_written} rows -> {state.writer.path}")
