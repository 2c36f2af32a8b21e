"""scripts/ab-campaign's pieces without a session: the injected slowdown on a fake clock, and the
campaign's table from fake session folders (two sides' files, the marker, session.json)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from frames import write_frame
from gpubench.reports.judge.load import LABELS, load_results

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "data" / "golden_laptop.csv"


def load_module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    # dataclasses look their module up while the class is made
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


slowdown = load_module(
    "slowdown", ROOT / "docs" / "validation" / "ab-campaign-tools" / "inject" / "slowdown.py"
)
campaign = load_module("ab_campaign", ROOT / "scripts" / "ab_campaign.py")


class FakeClock:
    """A clock that moves only when told: a call 'takes' what it advances."""

    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def test_a_slowed_call_waits_factor_minus_one_of_its_own_time_less_the_wrappers_cost():
    clock, waits = FakeClock(), []

    def work() -> str:
        clock.now_s += 0.010
        return "result"

    wrapped = slowdown.slowed(work, 1.10, overhead_s=0.0002, clock=clock, wait=waits.append)
    assert wrapped() == "result"
    assert waits == [pytest.approx(0.010 * 0.10 - 0.0002)]


def test_a_nested_call_is_slowed_once_at_the_outermost_call():
    clock, waits = FakeClock(), []

    def layer(depth: int) -> None:
        clock.now_s += 0.001
        if depth:
            wrapped(depth - 1)

    wrapped = slowdown.slowed(layer, 1.5, clock=clock, wait=waits.append)
    # four layers of 1 ms: one wait of half of 4 ms, not one per layer
    wrapped(3)
    assert waits == [pytest.approx(0.002)]


def test_a_factor_of_one_never_waits_and_a_factor_below_one_is_refused(monkeypatch):
    clock, waits = FakeClock(), []

    def work() -> None:
        clock.now_s += 0.005

    slowdown.slowed(work, 1.0, overhead_s=1e-6, clock=clock, wait=waits.append)()
    assert waits == []
    with pytest.raises(ValueError, match="factor of 1 or more"):
        slowdown.install(["json.dumps"], 0.9)


def test_targets_are_dotted_names_resolved_to_their_owner_and_a_bad_one_is_named():
    import json as json_module

    assert slowdown.resolve("json.dumps") == (json_module, "dumps")
    assert slowdown.resolve("json.JSONEncoder.encode") == (json_module.JSONEncoder, "encode")
    with pytest.raises(ValueError, match="names no callable"):
        slowdown.resolve("json.no_such_thing")


def test_without_targets_nothing_is_installed(monkeypatch):
    import json as json_module

    before = json_module.dumps
    slowdown.install_from_env({"GPUBENCH_SLOW_FACTOR": "2"})
    assert json_module.dumps is before


def write_session(
    folder: Path,
    scenario: str,
    change: dict[str, float],
    exit_code: int,
    pairs: int = 10,
    threads: int | None = None,
) -> None:
    """A finished fixed-design session of the twelve cases: side B is side A times change[case], 1%
    noise."""
    golden = load_results([GOLDEN]).drop(columns=list(LABELS))
    base = pd.concat(
        [golden[golden["status"] == "ok"].head(1)] * len(campaign.CASES), ignore_index=True
    )
    base["case_id"], base["workload"] = (
        list(campaign.CASES),
        [case.split("/")[0] for case in campaign.CASES],
    )
    rng = np.random.default_rng(len(scenario) + exit_code)
    folder.mkdir(parents=True)
    for side in "AB":
        frames = []
        for build in range(pairs):
            frame = base.copy()
            factor = (
                frame["case_id"].map(lambda case: change.get(case, 1.0)).to_numpy()
                if side == "B"
                else 1.0
            )
            frame["run_id"], frame["build"] = f"ab-{side}", build
            frame["median_s"] = (
                frame["median_s"].to_numpy() * factor * np.exp(rng.normal(0, 0.01, len(frame)))
            )
            stamp = pd.Timestamp("2026-12-01", tz="UTC") + pd.Timedelta(seconds=20 * build)
            frame["timestamp_utc"] = stamp.isoformat()
            frames.append(frame)
        whole = pd.concat(frames, ignore_index=True)
        write_frame(whole, folder / f"ab-{side}.csv", list(whole.columns))
    (folder / "ab.ab.json").write_text(
        json.dumps({"session": "ab", "design": "fixed", "pairs_planned": pairs})
    )
    (folder / "ab.log").write_text("gpubench ab: ended: every case decided after 10 pair(s)\n")
    record = {
        "scenario": scenario,
        "busy": False,
        "threads": threads,
        "exit_code": exit_code,
        "wall_s": 61.0,
        "load_start": 1.0,
        "load_end": 2.0,
        "command": "ab ...",
    }
    (folder / "session.json").write_text(json.dumps(record))


def test_the_table_counts_injected_cases_caught_and_untouched_cases_flagged(tmp_path):
    write_session(tmp_path / "aa" / "s01", "aa", {}, 0)
    write_session(
        tmp_path / "one-x1.10" / "s01", "one-x1.10", {"elementwise/add-fp32-2^20": 1.3}, 1
    )
    # an untouched case flagged
    both = {"elementwise/add-fp32-2^20": 1.3, "matmul/fp32-n512": 1.3}
    write_session(tmp_path / "one-x1.10" / "s02", "one-x1.10", both, 1)
    write_session(
        tmp_path / "all-x1.05" / "s01", "all-x1.05", dict.fromkeys(campaign.CASES, 1.3), 1
    )
    # an unfinished session (no session.json): not counted
    (tmp_path / "aa" / "s02").mkdir()
    found = campaign.outcomes(tmp_path)
    assert [(o.scenario, o.caught, o.injected, o.flagged, o.untouched) for o in found] == [
        ("aa", 0, 0, 0, 12),
        ("all-x1.05", 12, 12, 0, 0),
        ("one-x1.10", 1, 1, 0, 11),
        ("one-x1.10", 1, 1, 1, 11),
    ]
    rows = campaign.table(found).splitlines()[2:]
    assert rows[0].startswith("| A/A (both sides identical) | 1 | 0×1 | — | 0/12 (0%) |")
    assert rows[1].startswith("| one case x1.10 (torch.add) | 2 | 1×2 | 2/2 (100%) | 1/22 (5%) |")
    assert rows[2].startswith(
        "| every case x1.05 | 1 | 1×1 | 12/12 (100%) | — | slower×1 | 10 (10–10) | 61 (61–61) "
        "| 1.50 (1.50–1.50) |"
    )
    assert "every case decided after 10 pair(s)" in campaign.session_table(found)
    assert all(
        row.endswith(f" | {campaign.spread([100 * o.detectable], 1)} |")
        for row, o in zip(rows, found[:1])
    )


def test_sessions_with_fewer_threads_are_a_row_of_their_own_with_their_resolution(tmp_path):
    write_session(tmp_path / "aa" / "s01", "aa", {}, 0)
    write_session(tmp_path / "aa-t1" / "s01", "aa", {}, 0, threads=1)
    found = campaign.outcomes(tmp_path)
    rows = campaign.table(found).splitlines()[2:]
    assert [row.split(" | ")[0] for row in rows] == [
        "| A/A (both sides identical)",
        "| A/A (both sides identical), --threads 1",
    ]
    # 1% noise over 10 pairs
    assert all(o.detectable is not None and 0 < o.detectable < 0.1 for o in found)
    assert rows[1].endswith(
        f" | {100 * found[1].detectable:.1f} "
        f"({100 * found[1].detectable:.1f}–{100 * found[1].detectable:.1f}) |"
    )
    assert "| aa | no | 1 | 0 | 10 |" in campaign.session_table(found)


def test_a_finished_session_is_skipped_and_an_unfinished_one_is_run_again(tmp_path, monkeypatch):
    done = tmp_path / "aa" / "s01"
    done.mkdir(parents=True)
    (done / "session.json").write_text("{}")
    stale = tmp_path / "aa" / "s02"
    stale.mkdir()
    (stale / "ab-A.csv").write_text("half a session")
    ran = []
    monkeypatch.setattr(
        campaign,
        "run_session",
        lambda scenario, folder, design, busy, threads: (
            ran.append(folder)
            or {"exit_code": 0, "wall_s": 1.0, "load_start": 0.0, "load_end": 0.0}
        ),
    )
    campaign.run_campaign(tmp_path, ["aa"], 2, ["--budget", "1m"], busy=False)
    assert ran == [stale]
    campaign.run_campaign(tmp_path, ["aa"], 1, ["--budget", "1m"], busy=True, threads=1)
    assert ran[1:] == [tmp_path / "aa-busy-t1" / "s01"]


def test_the_factor_table_shows_what_each_pair_of_processes_measured(tmp_path):
    add, others = (
        "elementwise/add-fp32-2^20",
        [case for case in campaign.CASES if case != "elementwise/add-fp32-2^20"],
    )
    pairs = [
        [{add: 1.0, **dict.fromkeys(others, 2.0)}, {add: factor, **dict.fromkeys(others, 2.0)}]
        for factor in (1.08, 1.12, 1.10)
    ]
    (tmp_path / "verify").mkdir()
    (tmp_path / "verify" / "one-x1.10.json").write_text(
        json.dumps({"scenario": "one-x1.10", "pairs": pairs})
    )
    rows = campaign.factor_table(tmp_path).splitlines()
    assert f"| one-x1.10 | {add} | ×1.10 | ×1.100 (1.080–1.120) | 3 |" in rows
    assert "| one-x1.10 | matmul/fp32-n512 | ×1 | ×1.000 (1.000–1.000) | 3 |" in rows
    assert "| all-x1.05 | (not measured: scripts/ab-campaign verify) | | | |" in rows


def test_the_commands_shown_are_the_sessions_gpubench_ab_commands(tmp_path):
    shown = campaign.commands(tmp_path, ["--budget", "5m"])
    assert "\ngpubench ab --device cpu --budget 5m -k " in shown
    assert "--b-env=GPUBENCH_SLOW_TARGETS=torch.add --b-env=GPUBENCH_SLOW_FACTOR=1.10\n" in shown
