"""pytest plugin: gpubench's options, validation before any case, the synced timer installed into
pytest-benchmark, case parametrization, and the `gpubench` fixture that records rows."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest
import torch

from harness import timing
from harness.cases import BUDGETS, PROFILE_HELP, Case, CaseSkipped, ProfileError, check_profile
from harness.datasets import DATASET_CHOICES, DatasetError, check_dataset_request, default_data_root
from harness.device import DEVICE_CHOICES, DeviceError, resolve_device
from harness.env import fingerprint, gpu_telemetry
from harness.results import ResultsWriter, check_writable, new_run_id, write_sidecar
from harness.runner import Build, RunContext, run_case, summary_line
from harness.workloads.data_source import DataSource
from harness.workloads.ddp import NprocError, check_nproc, default_nproc
from harness.schema import RUN_COLUMNS, SCHEMA_VERSION

SYNCED_TIMER = "harness.timing.synced_clock"
STATE = pytest.StashKey["GpubenchState"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpubench")
    group.addoption("--device", default="auto", help=f"device to benchmark: {DEVICE_CHOICES} (default auto = cuda > mps > cpu)")
    group.addoption("--profile", default="quick", help=f"size ladders and settings: {PROFILE_HELP}")
    group.addoption("--results-dir", default="results", help="folder for the run's CSV and sidecars (default: results/)")
    group.addoption("--run-id", default=None, help="name of this run's files (default: UTC time, host, pid)")
    group.addoption("--data-root", default=None, help=f"where MNIST / Fashion-MNIST live (default: {default_data_root()})")
    group.addoption("--dataset", default="auto", help=f"training data: {', '.join(DATASET_CHOICES)} (default auto: mnist > fashion-mnist > synthetic)")
    group.addoption("--nproc", type=int, default=None, help="processes for the distributed (DDP) cases (default: the GPU count on cuda, 2 on cpu)")
    group.addoption("--profile-ops", action="store_true", default=False, help="also run a few steps of each training case under torch.profiler and store the top 15 ops")


@dataclass
class GpubenchState:
    """Per-session state; the results file and fingerprint are created on the first case, so a
    pytest run that records nothing writes nothing."""

    device: torch.device
    profile: str
    results_dir: Path
    run_id: str
    data_root: Path
    dataset: str
    profile_ops: bool
    nproc: int
    writer: ResultsWriter | None = None
    env: dict[str, Any] = field(default_factory=dict)
    telemetry_start: dict[str, Any] = field(default_factory=dict)
    top_ops: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _data: DataSource | None = None

    @property
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

    def context(self) -> RunContext:
        if self.writer is None:
            self.env = fingerprint(self.device)
            self.telemetry_start = gpu_telemetry(self.device.index or 0) if self.device.type == "cuda" else {}
            self.writer = ResultsWriter(self.results_dir, self.run_id)
        base = {k: v for k, v in self.env.items() if k in RUN_COLUMNS}
        base.update(schema_version=SCHEMA_VERSION, run_id=self.run_id, profile=self.profile)
        return RunContext(self.device, self.profile, BUDGETS[self.profile], base, self.writer)


def _install_synced_timer(config: pytest.Config, device: torch.device) -> None:
    """Make pytest-benchmark time with the synced clock. A user's --benchmark-timer stays the host
    clock underneath, so it remains pluggable."""
    chosen = getattr(config.option, "benchmark_timer", None)
    base_clock = None
    if chosen and chosen not in ("time.perf_counter", SYNCED_TIMER):
        from pytest_benchmark.utils import load_timer

        base_clock = load_timer(chosen).target
    timing.set_active_device(device, base_clock)
    if chosen is not None:
        config.option.benchmark_timer = SYNCED_TIMER


def pytest_configure(config: pytest.Config) -> None:
    """Validate everything before the first case: a bad value is one line and exit code 4."""
    try:
        device = resolve_device(config.getoption("device"))
        profile = check_profile(config.getoption("profile"))
        results_dir = Path(config.getoption("results_dir"))
        data_root = Path(config.getoption("data_root") or default_data_root())
        dataset = check_dataset_request(config.getoption("dataset"), data_root)
        nproc = check_nproc(config.getoption("nproc") or default_nproc(device), device)
    except (DeviceError, ProfileError, DatasetError, NprocError) as error:
        raise pytest.UsageError(str(error)) from None
    _install_synced_timer(config, device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    state = GpubenchState(device, profile, results_dir, config.getoption("run_id") or new_run_id(), data_root, dataset, config.getoption("profile_ops"), nproc)
    config.stash[STATE] = state


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
    """Parametrize `case` from the bench module's `gpubench_cases(profile, device)`."""
    if "case" not in metafunc.fixturenames:
        return
    cases_for: Callable[..., list[Case]] | None = getattr(metafunc.module, "gpubench_cases", None)
    if cases_for is None:
        return
    state: GpubenchState = metafunc.config.stash[STATE]
    wants_nproc = "nproc" in inspect.signature(cases_for).parameters
    cases = cases_for(state.profile, state.device, state.nproc) if wants_nproc else cases_for(state.profile, state.device)
    metafunc.parametrize("case", cases, ids=[c.test_id for c in cases])


class Recorder:
    """The `gpubench` fixture: runs a case through the harness and records its row."""

    def __init__(self, state: GpubenchState, benchmark: Any, request: pytest.FixtureRequest) -> None:
        self.state = state
        self.benchmark = benchmark
        self.request = request

    @property
    def device(self) -> torch.device:
        return self.state.device

    @property
    def data(self) -> DataSource:
        return self.state.data

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

    def run(self, case: Case, build: Build) -> dict[str, Any]:
        self.benchmark.group = case.workload
        if self.benchmark.disabled:
            # --benchmark-disable: run once as a smoke test, record nothing.
            try:
                timed = build(case, self.state.device, self.state.profile)
            except CaseSkipped as skip:
                pytest.skip(str(skip))
            try:
                timed.fn()
            finally:
                if timed.cleanup is not None:
                    timed.cleanup()  # e.g. TF32 must not leak into the next case
            return {}
        try:
            row = run_case(case, build, self.benchmark, self.state.context())
        finally:
            self.state.release_device_data()
        if self.request.config.getoption("verbose") > 0:
            self.progress(summary_line(row))
        if row["status"] == "skipped":
            pytest.skip(row["reason"])
        if row["status"] == "oom":
            pytest.skip(f"out of memory: {row['reason']}")
        return row


@pytest.fixture
def gpubench(benchmark: Any, request: pytest.FixtureRequest) -> Recorder:
    return Recorder(request.config.stash[STATE], benchmark, request)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is None or state.writer is None:
        return
    end = gpu_telemetry(state.device.index or 0) if state.device.type == "cuda" else {}
    write_sidecar(state.results_dir, state.run_id, "env", {"fingerprint": state.env, "gpu_telemetry_start": state.telemetry_start, "gpu_telemetry_end": end})
    state.writer.close()
    terminalreporter.write_line(f"gpubench: {state.writer.rows_written} rows -> {state.writer.path}")
