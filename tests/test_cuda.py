"""CUDA-only checks: they run on a GPU machine and skip with a reason elsewhere."""

import time

import pytest
import torch
from fakes import FakeBenchmark, RunContext, run_with

from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.devices.device import memory_snapshot, reset_peak_memory
from gpubench.harness.devices.energy import EnergyMeter, energy_counter, gpu_sampler, idle_power_w
from gpubench.harness.measurement.measure import Timed, measure
from gpubench.harness.core.plan import BuildTiming
from gpubench.harness.measurement.timing import SyncedClock, cuda_event_samples
from gpubench.harness.workloads import matmul, selfcheck, transfer
from gpubench.harness.workloads.common import matmuls

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs CUDA: torch.cuda.is_available() is False"
)
GPU = torch.device("cuda", 0)


CLOCK = SyncedClock(GPU) if torch.cuda.is_available() else None


def gpu_context(profile: str = "smoke") -> BuildContext:
    return BuildContext(GPU, profile, CLOCK)


def test_synced_clock_agrees_with_cuda_events():
    a = torch.randn(4096, 4096, device=GPU)
    fn = lambda: a @ a  # noqa: E731
    host = measure(
        Timed(fn=fn), BuildTiming(target_s=0.2, min_rounds=10, warmup_calls=3), CLOCK
    ).samples_s
    events = cuda_event_samples(fn, 1, 20)
    ratio = sorted(host)[len(host) // 2] / sorted(events)[len(events) // 2]
    assert 0.8 < ratio < 1.25


def test_an_unsynced_clock_would_be_caught():
    """What the selfcheck exists for: without the sync, the host clock reads only the launch."""
    a = torch.randn(8192, 8192, device=GPU)
    a @ a
    torch.cuda.synchronize()
    start = time.perf_counter()
    a @ a
    launch_only = time.perf_counter() - start
    torch.cuda.synchronize()
    events = sorted(cuda_event_samples(lambda: a @ a, 1, 5))[2]
    assert launch_only < 0.5 * events


def test_peak_memory_counts_a_large_allocation():
    reset_peak_memory(GPU)
    block = torch.empty(256 * 2**20, dtype=torch.uint8, device=GPU)
    assert memory_snapshot(GPU).peak_bytes >= 256 * 2**20
    del block


def test_tf32_is_scoped_to_its_case(tmp_path):
    before = torch.get_float32_matmul_precision()
    ctx = RunContext(gpu_context(), {"device_name": torch.cuda.get_device_name()}, None)
    row = run_with(matmul.MatmulCase("tf32", 1024), matmul, FakeBenchmark(), ctx)
    assert row["status"] == "ok" and torch.get_float32_matmul_precision() == before


def test_pinned_transfer_copies_the_host_bytes_to_the_gpu():
    """The timed call of a pinned, non_blocking host-to-device case copies its pinned host buffer
    into its GPU tensor, host to device (checked after a sync: the copy is asynchronous)."""
    timed = transfer.set_up(transfer.TransferCase("h2d", 2**20, True, True), gpu_context())
    # what the timed call copies
    buffers = dict(
        zip(timed.fn.__code__.co_freevars, (cell.cell_contents for cell in timed.fn.__closure__))
    )
    host, on_device = buffers["host"], buffers["on_device"]
    sent = host.clone()
    returned = timed.fn()
    torch.cuda.synchronize()
    assert host.is_pinned() and on_device.device == GPU and returned is on_device
    # random bytes arrived on the GPU, not an all-zero buffer
    assert sent.any() and torch.equal(on_device.cpu(), sent)
    # and the host buffer was the source, not the destination
    assert torch.equal(host, sent)


def test_selfcheck_agrees_with_cuda_events_on_the_gpu():
    """The interleaved pairs: harness / torch.utils.benchmark and harness / CUDA events within
    ±3%."""
    timed = selfcheck.set_up(selfcheck.SelfcheckCase("fp32", 4096), gpu_context("quick"))
    try:
        measured = measure(timed, BuildTiming(target_s=0.2, min_rounds=5, warmup_calls=3), CLOCK)
        # the pairs, as run_case runs them; raises SelfcheckFailed on a clear disagreement
        figures = timed.companion(measured)
    finally:
        timed.cleanup()
    assert "inconclusive" not in figures["reason"], figures["reason"]
    assert (
        0.97 <= figures["selfcheck_tub_ratio"] <= 1.03
        and 0.97 <= figures["selfcheck_events_ratio"] <= 1.03
    )


def test_nvml_energy_of_a_busy_gpu_is_above_idle_and_below_the_power_limit():
    """The real counter: a matmul loop of ~1.5 s reads a power between idle and the board limit;
    telemetry sampled during it has the GPU's clock and temperature."""
    counter, note = energy_counter(GPU)
    if counter is None:
        pytest.skip(note)
    meter, sampler = EnergyMeter(counter), gpu_sampler(GPU)
    if sampler is None:
        pytest.skip("NVML answered no telemetry field on this GPU")
    idle_w = idle_power_w(meter)
    a = torch.randn(8192, 8192, device=GPU, dtype=torch.bfloat16)
    torch.cuda.synchronize()
    sampler.start()
    mark = meter.start()
    while meter.clock() - mark[1] < 1.5:
        for _ in range(20):
            a @ a
        torch.cuda.synchronize()
    reading, telemetry = meter.stop(mark), sampler.stop()
    # above any single GPU's board power today (H200 SXM: 700 W, B200: 1000 W)
    board_max_w = 1200.0
    assert (
        reading.energy_j is not None
        and idle_w is not None
        and idle_w < reading.avg_power_w < board_max_w
    )
    missing = [
        column
        for column in ("gpu_sm_clock_mhz", "gpu_temp_c", "gpu_power_w")
        if telemetry.get(column) is None
    ]
    for column in ("gpu_sm_clock_mhz", "gpu_temp_c"):
        assert column in missing or telemetry[column] > 0
    assert "gpu_power_w" in missing or 0 < telemetry["gpu_power_w"] < board_max_w
    # a field this GPU (or VM) answers NotSupported: a skip with NVML's reason, not a failure on
    # None
    if missing:
        pytest.skip(f"telemetry without {', '.join(missing)}: {sampler.note}")


def test_operands_are_drawn_on_the_gpu():
    """An n=8192 operand drawn on the host took about a second, which a run's budget counted as the
    case's build."""
    a, b, _ = matmuls.operands(8192, "bf16", GPU)
    start_s = time.perf_counter()
    matmuls.operands(8192, "bf16", GPU, seed=1)
    torch.cuda.synchronize()
    assert time.perf_counter() - start_s < 0.2
    assert a.device.type == "cuda" and not torch.equal(a, b) and a.dtype == torch.bfloat16
