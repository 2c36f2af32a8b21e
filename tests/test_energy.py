"""Energy counters (NVML, RAPL) and GPU telemetry during a region, with fakes: no GPU needed."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from fakes import FakeBenchmark, FakeNvml, RunContext, SteppingClock, run_with

from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.devices.energy import (
    EnergyMeter,
    EnergyReading,
    NvmlCounter,
    RaplCounter,
    TelemetrySampler,
    energy_counter,
    gpu_sampler,
    idle_power_w,
    rapl_counter,
    summarize_telemetry,
)
from gpubench.harness.measurement.energy_columns import energy_figures
from gpubench.harness.measurement.loop import energy_by_repetition
from gpubench.harness.devices.env import gpu_other_processes, gpu_telemetry
from gpubench.harness.devices.nvml_probe import probe_nvml
from gpubench.harness.processes.turns import SESSION_PID_ENV
from gpubench.harness.measurement.measure import Timed, measure
from gpubench.harness.core.plan import BuildTiming, RoundPlan
from gpubench.harness.budget.shares import CaseShare
from gpubench.harness.records.results import ResultsWriter
from gpubench.harness.records.schema import SCHEMA_VERSION
from gpubench.harness.measurement.timing import SyncedClock
from gpubench.harness.workloads.matmul import MatmulCase

CPU = torch.device("cpu")


def nvml_sample(nvml, handle) -> dict[str, float]:
    """One reading of every field NVML answers: SM clock, temperature, power, throttle bits."""
    return probe_nvml(nvml, handle).sample()


def powercap(root: Path, zones: dict[str, tuple[str, int, int]]) -> Path:
    """A fake /sys/class/powercap: zone -> (name, energy_uj, max_energy_range_uj)."""
    for zone, (name, energy_uj, range_uj) in zones.items():
        folder = root / zone
        folder.mkdir(parents=True)
        (folder / "name").write_text(name + "\n")
        (folder / "energy_uj").write_text(f"{energy_uj}\n")
        (folder / "max_energy_range_uj").write_text(f"{range_uj}\n")
    return root


def set_uj(root: Path, zone: str, energy_uj: int) -> None:
    (root / zone / "energy_uj").write_text(f"{energy_uj}\n")


def test_nvml_meter_reads_the_counter_difference_over_the_region():
    nvml, clock = FakeNvml(), SteppingClock()
    meter = EnergyMeter(NvmlCounter(0, nvml), clock=clock)
    mark = meter.start()
    # 450 J
    nvml.energy_mj += 450_000
    clock.now_s += 1.5
    reading = meter.stop(mark)
    assert reading.energy_j == pytest.approx(450.0) and reading.avg_power_w == pytest.approx(300.0)
    assert reading.source == "nvml" and reading.reason == ""


def test_a_region_shorter_than_the_nvml_window_gives_no_figure_and_says_why():
    nvml, clock = FakeNvml(), SteppingClock()
    meter = EnergyMeter(NvmlCounter(0, nvml), clock=clock)
    mark = meter.start()
    nvml.energy_mj += 30_000
    clock.now_s += 0.2
    reading = meter.stop(mark)
    assert (
        reading.energy_j is None and "shorter than the nvml counter's 1 s window" in reading.reason
    )


def test_a_counter_that_does_not_move_gives_no_figure_and_says_why():
    clock = SteppingClock()
    meter = EnergyMeter(NvmlCounter(0, FakeNvml()), clock=clock)
    mark = meter.start()
    clock.now_s += 2.0
    reading = meter.stop(mark)
    assert reading.energy_j is None and "did not move in 2 s" in reading.reason


def test_a_gpu_without_the_energy_counter_is_one_line_not_an_error():
    counter, note = energy_counter(
        torch.device("cuda:0"), nvml_loader=lambda: FakeNvml(supports_energy=False)
    )
    assert counter is None and "no NVML energy counter (Not Supported" in note and "\n" not in note

    def missing():
        raise ImportError("No module named 'pynvml'")

    counter, note = energy_counter(torch.device("cuda:0"), nvml_loader=missing)
    assert counter is None and "pynvml" in note


def test_rapl_sums_package_zones_and_unwraps_the_counter(tmp_path):
    root = powercap(
        tmp_path,
        {
            "intel-rapl:0": ("package-0", 900, 1000),
            "intel-rapl:1": ("package-1", 100, 1000),
            "intel-rapl:0:0": ("core", 5, 1000),
            "intel-rapl:2": ("psys", 0, 1000),
        },
    )
    counter, note = rapl_counter(root)
    # sub-zones and psys left out
    assert note == "" and isinstance(counter, RaplCounter) and len(counter.zones) == 2
    start_j = counter.read_j()
    # wrapped: 900 -> 1000 -> 50 is 150 µJ
    set_uj(root, "intel-rapl:0", 50)
    # +200 µJ
    set_uj(root, "intel-rapl:1", 300)
    assert counter.read_j() - start_j == pytest.approx(350e-6)


def test_rapl_absent_or_unreadable_says_why_once(tmp_path, monkeypatch):
    counter, note = rapl_counter(tmp_path / "nothing")
    assert counter is None and "is absent" in note
    root = powercap(tmp_path / "pc", {"intel-rapl:0": ("package-0", 1, 1000)})

    def denied(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(
        Path,
        "read_text",
        lambda self, *a, **k: denied(self) if self.name == "energy_uj" else open(self).read(),
    )
    counter, note = rapl_counter(root)
    assert counter is None and "readable by root only" in note and "chmod" in note


def test_no_counter_means_empty_columns_not_a_failure(tmp_path):
    meter = EnergyMeter(None, "no RAPL energy counters: /sys/class/powercap is absent")
    assert idle_power_w(meter) is None
    row = _run_matmul(tmp_path, meter)
    assert row["status"] == "ok" and row.get("energy_j") is None and "energy" not in row["reason"]


class FakeCounter:
    """A counter whose joules are a linear function of a clock: `watts` of constant power."""

    source, min_window_s = "rapl", 0.05

    def __init__(self, clock, watts: float) -> None:
        self.clock, self.watts = clock, watts

    def read_j(self) -> float:
        return self.clock() * self.watts


def _run_matmul(
    tmp_path,
    meter,
    telemetry=None,
    figures=lambda s, r: {"tflops": 2.0},
    plan=None,
    samples=None,
    fn=None,
    build_index=0,
    profile="smoke",
):
    writer = ResultsWriter(tmp_path, "run")
    bctx = BuildContext(CPU, profile, SyncedClock(CPU), energy=meter, telemetry=telemetry)
    ctx = RunContext(
        bctx, {"schema_version": SCHEMA_VERSION, "run_id": "run", "device_name": "cpu"}, writer
    )

    class Workload:
        @staticmethod
        def set_up(case, ctx):
            return Timed(
                fn=fn or (lambda: torch.ones(64, 64) @ torch.ones(64, 64)),
                figures=figures,
                plan=plan,
            )

    try:
        return run_with(
            MatmulCase("fp32", 64), Workload, FakeBenchmark(samples or [0.001]), ctx, build_index
        )
    finally:
        writer.close()


def test_energy_per_call_power_and_per_joule_figures_land_in_the_row(tmp_path):
    meter = EnergyMeter(FakeCounter(time.perf_counter, watts=50.0))
    # every region is long enough: no repetition
    meter.counter.min_window_s = 0.0
    row = _run_matmul(
        tmp_path,
        meter,
        plan=RoundPlan(0, 10, 5, 0.0),
        figures=lambda s, r: {"tflops": 2.0, "samples_per_s": 100.0},
    )
    assert row["status"] == "ok" and row["energy_source"] == "rapl"
    assert row["avg_power_w"] == pytest.approx(50.0, rel=0.05)
    # its division by the calls is checked with a call-counting counter below
    assert row["energy_j"] > 0
    assert row["tflop_per_j"] == pytest.approx(2.0 / row["avg_power_w"])
    assert row["samples_per_j"] == pytest.approx(100.0 / row["avg_power_w"])


def test_a_short_repeatable_region_is_repeated_for_its_energy(tmp_path):
    meter = EnergyMeter(FakeCounter(time.perf_counter, watts=20.0))
    # the timed rounds (a few ms) are far shorter
    meter.counter.min_window_s = 0.5
    # planned from warm-up (plan=None): repeatable
    row = _run_matmul(tmp_path, meter, profile="quick")
    assert row["energy_j"] is not None and row["avg_power_w"] == pytest.approx(20.0, rel=0.05)
    # one call's share of a window of >= 0.5 s
    assert row["energy_j"] / row["avg_power_w"] < 0.5
    assert "shorter than" not in row["reason"]


def test_the_smoke_profile_never_repeats_a_short_region_for_its_energy(tmp_path):
    """Smoke figures are not for reading: on a GPU each repetition would be over a second per
    case."""
    meter = EnergyMeter(FakeCounter(time.perf_counter, watts=20.0))
    # a repetition would take 36 s
    meter.counter.min_window_s = 30.0
    start_s = time.perf_counter()
    row = _run_matmul(tmp_path, meter, profile="smoke")
    assert time.perf_counter() - start_s < 10
    assert row["status"] == "ok" and row.get("energy_j") is None
    assert "(not repeated for energy in the smoke profile)" in row["reason"]


def ten_ms_calls():
    """A call of 10 ms on a fake clock, the calls it made, and a 100-W meter with NVML's 1-s window
    on that clock (a repetition fills 1.2 s)."""
    clock = SteppingClock(0.0)
    calls = []

    def fn():
        calls.append(1)
        clock.now_s += 0.010

    meter = EnergyMeter(FakeCounter(clock, watts=100.0), clock=clock)
    meter.counter.min_window_s = 1.0
    return clock, calls, fn, meter


def test_a_repetition_that_does_not_fit_the_cases_share_of_the_budget_is_not_run():
    clock, calls, fn, meter = ten_ms_calls()
    share = CaseShare(share_s=1.0, budget_s=60.0, now=clock)
    measured = measure(
        Timed(fn=fn),
        BUDGET,
        SyncedClock(CPU, clock),
        meter=meter,
        share=share,
        why_not_repeated=None,
    )
    # warm-up and rounds, no 120-call repetition
    assert len(calls) < 10 and measured.calls == measured.plan.rounds * measured.plan.iterations
    assert (
        measured.energy.energy_j is None
        and "do not fit the" in measured.energy.reason
        and "left of the case's share" in measured.energy.reason
    )


def test_a_later_build_does_not_repeat_a_short_region_and_says_why(tmp_path):
    meter = EnergyMeter(FakeCounter(time.perf_counter, watts=20.0))
    # longer than the rounds; a first build would repeat the calls for 36 s
    meter.counter.min_window_s = 30.0
    row = _run_matmul(tmp_path, meter, build_index=1, profile="quick")
    assert row["status"] == "ok" and row.get("energy_j") is None
    assert "(measured once per case, in its first build)" in row["reason"]


BUDGET = BuildTiming(target_s=0.05, min_round_s=0.001, min_rounds=3, max_rounds=5, warmup_calls=2)


def test_measure_repeats_a_short_region_for_its_energy_before_it_returns():
    """The repetition is part of the measurement: `measure()` returns the per-call reading, the
    rounds' samples untouched; not asked for (the default), the region's own (empty) reading
    stays."""
    clock = SteppingClock(0.0)

    def fn():
        clock.now_s += 0.010

    def measured(repeat_energy):
        meter = EnergyMeter(FakeCounter(clock, watts=100.0), clock=clock)
        meter.counter.min_window_s = 1.0
        return measure(
            Timed(fn=fn),
            BUDGET,
            SyncedClock(CPU, clock),
            meter=meter,
            why_not_repeated=None if repeat_energy else "",
        )

    repeated, single = measured(True), measured(False)
    assert repeated.calls == 1 and repeated.energy.energy_j == pytest.approx(100.0 * 0.010)
    # the rounds' own samples
    assert repeated.samples_s == pytest.approx([0.010] * repeated.plan.rounds)
    assert (
        single.energy.energy_j is None
        and single.energy.reason
        and single.calls == single.plan.rounds * single.plan.iterations
    )


@pytest.mark.parametrize("median_s", [0.0105, 0.012, 0.008])
def test_energy_repetition_adds_the_missing_calls_instead_of_doubling(median_s):
    """Back-to-back calls of 10 ms on a fake clock; the median they are sized from includes a sync
    per round (longer), or is shorter. The region ends just past the 1.2 s it needs, not 2x."""
    clock, calls, fn, meter = ten_ms_calls()
    reading = energy_by_repetition(fn, median_s, meter, clock)
    # about window / per call (old code: 2x when the median was long)
    assert 1.2 <= len(calls) * 0.010 <= 1.2 * 1.06
    assert reading.energy_j == pytest.approx(100.0 * 0.010) and reading.seconds == pytest.approx(
        0.010
    )


def test_a_short_fixed_region_gets_an_empty_figure_with_the_reason(tmp_path):
    meter = EnergyMeter(FakeCounter(time.perf_counter, watts=20.0))
    meter.counter.min_window_s = 30.0
    # a fixed plan (an epoch) cannot be repeated
    row = _run_matmul(tmp_path, meter, plan=RoundPlan(0, 1, 1, 0.0))
    assert (
        row["status"] == "ok"
        and row.get("energy_j") is None
        and "shorter than the rapl counter's 30 s window" in row["reason"]
    )


def test_telemetry_is_read_during_the_region_and_throttling_is_said(tmp_path):
    nvml = FakeNvml()
    readings = iter(
        [(1980, 50, 300_000, 0), (1410, 83, 700_000, 0x4 | 0x20)]
        + [(1410, 84, 690_000, 0x4)] * 1000
    )

    def read():
        nvml.sm_clock_mhz, nvml.temp_c, nvml.power_mw, nvml.throttle_bits = next(readings)
        return nvml_sample(nvml, "gpu0")

    # a region of 3 x 20 ms polled every millisecond: dozens of readings, the first one before
    # throttling
    row = _run_matmul(
        tmp_path,
        EnergyMeter(None),
        telemetry=TelemetrySampler(read, interval_s=0.001),
        plan=RoundPlan(0, 1, 3, 0.0),
        fn=lambda: time.sleep(0.02),
    )
    assert row["gpu_temp_c"] >= 83 and row["gpu_sm_clock_mhz"] == 1410 and row["gpu_power_w"] > 600
    assert (
        "software power cap" in row["gpu_throttle"]
        and "software thermal slowdown" in row["gpu_throttle"]
    )
    # the thermal slowdown flags the row; the power cap (a loaded data-centre GPU's normal state) is
    # only recorded
    assert (
        "throttled during the timed region: software thermal slowdown" in row["reason"]
        and "throttled" in row["flags"]
    )
    assert "power cap" not in row["reason"]


def test_the_power_cap_alone_is_recorded_but_flags_nothing(tmp_path):
    nvml = FakeNvml()
    nvml.throttle_bits = 0x4
    row = _run_matmul(
        tmp_path,
        EnergyMeter(None),
        telemetry=TelemetrySampler(lambda: nvml_sample(nvml, "gpu0"), interval_s=0.001),
        plan=RoundPlan(0, 1, 3, 0.0),
        fn=lambda: time.sleep(0.01),
    )
    assert (
        row["gpu_throttle"] == "software power cap"
        and "throttled" not in row["flags"]
        and "throttled" not in row["reason"]
    )


def test_warm_up_and_calibration_stay_outside_the_energy_region(tmp_path):
    """A counter that counts the calls made while it is read: the region's joules come from the
    timed rounds only (pytest-benchmark's rounds x iterations), not the warm-up calls before."""
    calls = []

    class CallCounter:
        source, min_window_s = "rapl", 0.0

        def read_j(self) -> float:
            # one joule per call so far
            return float(len(calls))

    row = _run_matmul(
        tmp_path,
        EnergyMeter(CallCounter()),
        plan=RoundPlan(3, 2, 5, 0.0),
        fn=lambda: calls.append(1),
    )
    # three warm-up calls, 5 rounds of 2, and pytest-benchmark's extra call for the result
    # (iterations > 1)
    assert len(calls) == 3 + 2 * 5 + 1
    # 11 joules over the 11 calls in the region (the extra one counted): warm-up's 3 left out
    assert row["energy_j"] == pytest.approx(1.0)


def test_an_epochs_samples_per_joule_is_its_samples_over_its_joules(tmp_path):
    figures = energy_figures(
        EnergyReading(600.0, 20.0, "nvml"), 1, {"samples_per_s": 4000.0}, samples_per_call=60_000
    )
    # not 4000 / 30 W: the throughput covers training only
    assert figures["samples_per_j"] == pytest.approx(100.0)
    assert energy_figures(EnergyReading(600.0, 20.0, "nvml"), 1, {"samples_per_s": 4000.0})[
        "samples_per_j"
    ] == pytest.approx(4000 / 30)


def test_telemetry_summary_ignores_idle_and_clock_setting_bits():
    summary = summarize_telemetry(
        [{"sm_clock_mhz": 1980.0, "temp_c": 40.0, "power_w": 100.0, "throttle_bits": 0x1 | 0x2}]
    )
    assert summary["gpu_throttle"] == "" and summary["gpu_power_w"] == 100.0


# ---- NVML field by field -------------------------------------------------

# never touched: the fake NVML answers for it
GPU = torch.device("cuda", 0)


def _sample_region(sampler, seconds=0.0):
    sampler.start()
    time.sleep(seconds)
    return sampler.stop()


def test_one_unsupported_field_removes_only_that_field_and_the_run_says_which():
    nvml = FakeNvml(not_supported=("nvmlDeviceGetTemperature",), instant_power_mw=450_000)
    sampler = gpu_sampler(GPU, nvml_loader=lambda: nvml)
    # the old probe dropped every field for one NotSupported
    assert sampler is not None
    summary = _sample_region(sampler)
    assert (
        "gpu_temp_c" not in summary
        and summary["gpu_sm_clock_mhz"] == 1980
        and summary["gpu_power_w"] == 450.0
    )
    assert sampler.note == "NVML did not answer: temp_c (Not Supported)"


def test_the_instantaneous_power_field_is_preferred_over_the_one_second_average():
    # the averaged reading (300 W) mostly holds the second before the region
    nvml = FakeNvml(instant_power_mw=650_000)
    summary = _sample_region(gpu_sampler(GPU, nvml_loader=lambda: nvml))
    assert summary["gpu_power_w"] == 650.0 and "gpu_power_note" not in summary


# the field answers NotSupported / no such call
@pytest.mark.parametrize("unsupported", [(), ("nvmlDeviceGetFieldValues",)])
def test_an_averaged_power_is_left_empty_below_a_second_and_the_row_says_why(tmp_path, unsupported):
    nvml = FakeNvml(not_supported=unsupported)
    sampler = gpu_sampler(GPU, nvml_loader=lambda: nvml)
    assert sampler.power_averaged and "gpu_power_w is NVML's 1 s average" in sampler.note
    row = _run_matmul(
        tmp_path,
        EnergyMeter(None),
        telemetry=sampler,
        plan=RoundPlan(0, 1, 3, 0.0),
        fn=lambda: time.sleep(0.01),
    )
    assert row.get("gpu_power_w") is None and row["gpu_sm_clock_mhz"] == 1980
    assert (
        "gpu_power_w: left empty, the region" in row["reason"]
        and "shorter than the 1 s NVML averages" in row["reason"]
    )


def test_an_averaged_power_over_a_region_of_a_second_or_more_is_kept():
    clock = SteppingClock(0.0)
    sampler = TelemetrySampler(
        lambda: {"power_w": 300.0}, interval_s=10.0, power_averaged=True, clock=clock
    )
    sampler.start()
    clock.now_s = 1.5
    assert sampler.stop()["gpu_power_w"] == 300.0


def test_a_graphics_process_query_not_supported_keeps_the_busy_gpu_check(monkeypatch):
    nvml = FakeNvml(
        not_supported=("nvmlDeviceGetGraphicsRunningProcesses",), pids=(os.getpid(), 2**22 + 7)
    )
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    # another process holds the GPU; this one is not counted
    assert gpu_other_processes(0) == 1


def _pids_a_build_calls_its_own(session_pid: int) -> set[int]:
    code = (
        "import json; from gpubench.harness.devices.env import our_pids; "
        "print(json.dumps(sorted(our_pids())))"
    )
    env = dict(os.environ, **{SESSION_PID_ENV: str(session_pid)})
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return set(json.loads(done.stdout))


@pytest.mark.process
def test_an_ab_build_does_not_count_its_partner_waiting_for_its_turn_as_a_busy_gpu():
    """This test process plays the `gpubench ab` session; `sleep` is the partner build, idle beside
    the one measuring."""
    partner = subprocess.Popen(["sleep", "60"])
    try:
        assert partner.pid in _pids_a_build_calls_its_own(session_pid=os.getpid())
        # a pid that is no ancestor names no session
        assert partner.pid not in _pids_a_build_calls_its_own(session_pid=partner.pid)
    finally:
        partner.kill()
        partner.wait()


def test_a_compute_process_query_not_supported_removes_only_the_busy_gpu_check_and_says_so(
    monkeypatch,
):
    nvml = FakeNvml(
        not_supported=("nvmlDeviceGetComputeRunningProcesses",), instant_power_mw=400_000
    )
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    assert gpu_other_processes(0) is None
    sampler = gpu_sampler(GPU, nvml_loader=lambda: nvml)
    # telemetry stays
    assert sampler is not None and _sample_region(sampler)["gpu_power_w"] == 400.0
    assert sampler.note == (
        "the busy-GPU check is off: NVML's running compute processes query answered Not Supported; "
        "gpu_other_procs stays empty"
    )


def test_the_fingerprints_gpu_telemetry_keeps_the_fields_that_answer(monkeypatch):
    monkeypatch.setitem(
        sys.modules, "pynvml", FakeNvml(not_supported=("nvmlDeviceGetPowerManagementLimit",))
    )
    reading = gpu_telemetry(0)
    assert (
        reading["gpu_sm_clock_mhz"] == 1980
        and reading["gpu_power_w"] == 300.0
        and "gpu_power_limit_w" not in reading
    )


def test_the_runs_first_lines_say_once_what_nvml_did_not_answer():
    from types import SimpleNamespace

    from gpubench.harness.pytest_plugin.plugin import STATE, pytest_report_header

    sampler = gpu_sampler(
        GPU,
        nvml_loader=lambda: FakeNvml(
            not_supported=("nvmlDeviceGetTemperature",), instant_power_mw=1
        ),
    )
    ctx = SimpleNamespace(device=CPU, profile="smoke", energy=EnergyMeter(None), telemetry=sampler)
    config = SimpleNamespace(
        stash={STATE: SimpleNamespace(ctx=ctx, records=SimpleNamespace(csv_path="run.csv"))}
    )
    assert (
        "gpubench: telemetry: NVML did not answer: temp_c (Not Supported)"
        in pytest_report_header(config)
    )
