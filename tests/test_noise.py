"""The noise line (gpubench.reports.judge.noise decides, gpubench.reports.render.noise says it) from
synthetic build medians and load readings: no process runs."""

from __future__ import annotations

import math
import sys
from collections import namedtuple

import numpy as np
import pandas as pd
import pytest

from gpubench.harness.processes.cpu_readings import CpuWatch, cpu_seconds, steal_between
from gpubench.reports.judge.noise import Readings, build_spread
from gpubench.reports.render.noise import noise_line

ROUNDS = 100


def rows(
    medians_s: dict[str, list[float]],
    rel_iqr: float = 0.02,
    busy: float = 0.0,
    threads: int = 2,
    cores: int = 2,
) -> pd.DataFrame:
    """A run's ok rows: each case's build medians as given, each build's own spread `rel_iqr`."""
    out = [
        dict(
            case_id=case,
            build=build,
            status="ok",
            median_s=median,
            rel_iqr=rel_iqr,
            rounds=ROUNDS,
            cpu_busy_frac=busy,
            torch_threads=threads,
            cpu_cores=cores,
        )
        for case, medians in medians_s.items()
        for build, median in enumerate(medians)
    ]
    return pd.DataFrame(out)


def test_builds_that_agree_as_their_samples_allow_say_nothing() -> None:
    # own error of a build median: 1.25 * 0.02 / 1.349 / 10 = 0.19%; the builds differ by about that
    frame = rows({"a": [1.000, 1.002, 0.998], "b": [2.000, 2.004, 1.996]})
    assert noise_line(frame, Readings(steal_frac=0.0, load_avg=0.5)) is None
    # builds 4% apart, but each build's own samples spread wide (own error ~4.6%): nothing to act on
    noisy_calls = rows({"a": [1.00, 1.04, 0.97], "b": [2.00, 2.08, 1.95]}, rel_iqr=0.5)
    assert noise_line(noisy_calls, Readings()) is None


def test_disagreeing_builds_on_a_busy_machine_name_the_cause_the_cost_and_the_knob() -> None:
    frame = rows({"a": [1.0, 1.15, 0.9], "b": [2.0, 2.4, 1.9]}, busy=0.5, threads=2, cores=2)
    line = noise_line(frame, Readings(steal_frac=0.0, load_avg=3.2))
    assert line is not None and "\n" not in line
    assert "other processes used 50% of the CPU" in line
    assert "2 torch threads on 1 free core(s)" in line and "try --threads 1" in line
    assert "a quieter machine" in line and "load average 3.2 on 2 cores" in line
    assert "detectable change" in line and "instead of ~" in line


def test_a_busy_machine_whose_rounds_spread_as_wide_as_its_builds_is_still_said() -> None:
    # rounds within each build as wild as the builds (rel_iqr 5: a core shared with other processes)
    frame = rows({"a": [1.0, 1.4, 0.7], "b": [2.0, 2.6, 1.5]}, rel_iqr=5.0, busy=0.9, threads=2)
    line = noise_line(frame, Readings(load_avg=12.0))
    assert (
        line is not None and "each build's own samples as wide" in line and "instead of" not in line
    )
    assert (
        "other processes used 90% of the CPU" in line
        and "try --threads 1 or a quieter machine" in line
    )
    quiet = rows({"a": [1.0, 1.4, 0.7], "b": [2.0, 2.6, 1.5]}, rel_iqr=5.0, busy=0.0, threads=1)
    # nothing seen a user could change
    assert noise_line(quiet, Readings(load_avg=0.5)) is None


def test_steal_is_named_when_the_hypervisor_took_a_share() -> None:
    frame = rows({"a": [1.0, 1.15, 0.9]}, threads=1)
    line = noise_line(frame, Readings(steal_frac=0.12))
    assert line is not None and "the hypervisor took 12% (CPU steal)" in line
    # one thread on two free cores: not the knob
    assert "--threads" not in line


def test_bimodal_builds_are_counted() -> None:
    spread = build_spread(
        rows({"a": [1.0, 1.01, 1.3, 1.31], "b": [1.0, 1.1, 1.2, 1.3]}, rel_iqr=0.01)
    )
    assert spread.bimodal == 1 and spread.cases == 2 and spread.disagrees


def test_a_session_scales_its_own_detectable_change() -> None:
    a = rows({"a": [1.0, 1.2, 0.9, 1.1]}).assign(side="A")
    b = rows({"a": [1.0, 1.2, 0.9, 1.1]}).assign(side="B")
    frame = pd.concat([a, b], ignore_index=True)
    spread = build_spread(frame, ("side", "case_id"))
    line = noise_line(frame, Readings(), detectable=0.30, group=("side", "case_id"))
    quiet = 0.30 * spread.expected_log_sd / spread.observed_log_sd
    assert line is not None and f"detectable change 30% instead of ~{quiet:.0%}" in line
    assert "median of 2 cases on either side" in line


LINUX_TIMES = namedtuple(
    "scputimes", "user nice system idle iowait irq softirq steal guest guest_nice"
)


def test_steal_share_from_psutils_cpu_times(monkeypatch: pytest.MonkeyPatch) -> None:
    import psutil

    monkeypatch.setattr(
        psutil, "cpu_times", lambda: LINUX_TIMES(100, 0, 100, 700, 0, 0, 0, 100, 50, 0)
    )
    start = cpu_seconds()
    # guest time is in user already: not counted twice
    assert start == (100, 1000)
    monkeypatch.setattr(
        psutil, "cpu_times", lambda: LINUX_TIMES(200, 0, 200, 1300, 0, 0, 0, 300, 90, 0)
    )
    assert steal_between(start, cpu_seconds()) == pytest.approx(200 / 1000)
    assert steal_between(None, start) is None


def test_steal_is_none_where_the_system_does_not_say(monkeypatch: pytest.MonkeyPatch) -> None:
    import psutil

    watch = CpuWatch()
    monkeypatch.setattr(
        psutil, "cpu_times", lambda: namedtuple("scputimes", "user nice system idle")(1, 0, 1, 8)
    )
    # macOS: no steal
    assert cpu_seconds() is None and watch.steal_frac() is None


def test_linux_says_its_steal() -> None:
    seconds = cpu_seconds()
    assert (seconds is not None) == sys.platform.startswith("linux")
    assert seconds is None or 0.0 <= seconds[0] <= seconds[1]


def test_check_threads_refuses_zero_with_the_fix() -> None:
    from gpubench.harness.pytest_plugin.build_setup import check_threads
    from gpubench.harness.core.exits import UsageError

    assert check_threads(None) is None and check_threads(1) == 1
    with pytest.raises(
        UsageError, match=r"--threads 0: use 1 to \d+ torch threads .* such as --threads 1"
    ):
        check_threads(0)


def test_detectable_is_finite_and_grows_with_the_spread() -> None:
    from gpubench.reports.judge.noise import run_detectable

    assert math.isinf(run_detectable(0.1, 1))
    assert 0 < run_detectable(0.01, 3) < run_detectable(0.05, 3)
    assert np.isclose(run_detectable(0.0, 3), 0.0)
