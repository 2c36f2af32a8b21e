"""Time where the noise is, in a sequential `gpubench ab` session: decided cases get no more builds,
and each undecided case's builds are as long as its own noise and cost make worth it. A fake
launcher writes the builds' rows in-process: no process starts."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sequential_simulation as sq

from gpubench.harness.commands import ab
from gpubench.harness.commands.ab import AbSide, run_pairs
from gpubench.harness.commands.ab_sequential import Looks, choose_lengths
from gpubench.harness.core.plan import BuildNoise, best_build_s
from gpubench.harness.processes.cases_file import cases_text, read_cases_file
from gpubench.harness.processes.launch import Completed, Job
from gpubench.harness.processes.protocol import BuildPlan
from frames import write_frame
from gpubench.reports.judge.load import LABELS, load_results
from gpubench.reports.judge.verdicts import ALPHA

GOLDEN = Path(__file__).resolve().parent / "data" / "golden_laptop.csv"
LEAST_S = 0.1


def test_builds_are_longer_only_where_their_own_samples_are_the_noise() -> None:
    disagreeing = BuildNoise(between_var=0.05**2, round_var=0.01**2, round_s=0.002, overhead_s=0.5)
    sampling = BuildNoise(between_var=0.0, round_var=0.3**2, round_s=0.002, overhead_s=0.5)
    # more pairs, not longer builds
    assert best_build_s(disagreeing, LEAST_S, 2.0) == LEAST_S
    assert LEAST_S < best_build_s(sampling, LEAST_S, 10.0) < 10.0
    assert best_build_s(sampling, LEAST_S, 0.5) == 0.5
    # one spread per round: a 100 ms call's rounds cost 50x a 2 ms call's, so its builds are longer
    slow_call = BuildNoise(between_var=0.01**2, round_var=0.1**2, round_s=0.1, overhead_s=0.5)
    fast_call = BuildNoise(between_var=0.01**2, round_var=0.1**2, round_s=0.002, overhead_s=0.5)
    assert best_build_s(slow_call, 0.01, 60.0) == pytest.approx(
        best_build_s(fast_call, 0.01, 60.0) * math.sqrt(50)
    )


def test_the_cases_file_carries_each_case_s_seconds(tmp_path: Path) -> None:
    path = tmp_path / "cases.txt"
    path.write_text(cases_text(["a", "b"], {"b": 0.75}), encoding="utf-8")
    assert read_cases_file(path) == {"a": None, "b": 0.75}
    for bad in ("a 0\n", "a x\n", "a 1 2\n", "a 61\n"):
        path.write_text(bad, encoding="utf-8")
        with pytest.raises(ValueError, match="line 1 .* is not 'CASE' or 'CASE SECONDS'"):
            read_cases_file(path)


# Three kinds of case: decided soon (1% noise), builds that disagree beyond their samples (30%,
# tight rounds), builds whose own few wide rounds are the noise (shrinking as builds get longer).
QUIET, DISAGREE, SAMPLING = "quiet", "disagree", "sampling"
# a build of 0.1 s: 5 rounds, its median off by ~4%; of 2 s: 100 rounds, ~1%
SAMPLING_REL_IQR = 0.1
# each look reads both sides' files: a few seconds on a busy machine
MAX_PAIRS = 12


class FakeLauncher:
    """Writes a build's rows for the cases its cases file names, with the seconds it gives."""

    def __init__(self, folder: Path, cases: dict[str, pd.Series]) -> None:
        self.folder, self.cases, self.rng = folder, cases, np.random.default_rng(3)
        self.frames: dict[str, list[pd.Series]] = {"A": [], "B": []}
        self.builds: dict[str, list[int]] = {}
        self.files: list[str] = []

    def run(self, job: Job) -> Completed:
        side, build = job.plan.output_tag.split("-b")
        found = job.plan.cases
        wanted = read_cases_file(Path(found)) if found else dict.fromkeys(self.cases)
        if found:
            self.files.append(Path(found).read_text(encoding="utf-8"))
        for case, seconds in wanted.items():
            self.frames[side].append(self.row(case, int(build), side, seconds or LEAST_S))
            self.builds.setdefault(case, []).append(int(build))
        frame = pd.DataFrame(self.frames[side])
        write_frame(frame, self.folder / f"s-{side}.csv", list(frame.columns))
        return Completed(0)

    def row(self, case: str, build: int, side: str, seconds: float) -> pd.Series:
        row = self.cases[case].copy()
        rounds = max(2, round(50 * seconds))
        own = SAMPLING_REL_IQR * 1.2533 / 1.349 / math.sqrt(rounds) if case == SAMPLING else 0.001
        between = 0.3 if case == DISAGREE else 0.01 if case == QUIET else 0.0
        row["median_s"] = 1e-3 * math.exp(self.rng.normal(0, math.hypot(own, between)))
        row["rel_iqr"] = SAMPLING_REL_IQR if case == SAMPLING else 0.01
        row["rounds"], row["round_s"], row["build_s"] = rounds, seconds / rounds, seconds + 0.5
        row["run_id"], row["build"] = f"s-{side}", build
        row["timestamp_utc"] = (
            pd.Timestamp("2026-12-01", tz="UTC") + pd.Timedelta(seconds=20 * build)
        ).isoformat()
        return row


def golden_cases() -> dict[str, pd.Series]:
    golden = load_results([GOLDEN]).drop(columns=list(LABELS))
    ok = golden[golden["status"] == "ok"].drop_duplicates("case_id").iloc[:3]
    return {
        name: row.copy().set_axis(row.index).pipe(lambda r, n=name: r.replace(r["case_id"], n))
        for name, (_, row) in zip((QUIET, DISAGREE, SAMPLING), ok.iterrows())
    }


def test_decided_cases_get_no_more_builds_and_sampling_noise_gets_longer_ones(
    tmp_path, monkeypatch
) -> None:
    fake = FakeLauncher(tmp_path, golden_cases())
    monkeypatch.setattr(
        ab, "side_launchers", lambda sides, limit_s, fork: {side.name: fake for side in sides}
    )
    looks = Looks(tmp_path, "s", 0.05, budget_s=3600, max_pairs=MAX_PAIRS, least_build_s=LEAST_S)
    try:
        done, stop = run_pairs(
            (AbSide("A"), AbSide("B")),
            "s",
            MAX_PAIRS,
            ["benches"],
            tmp_path,
            tmp_path,
            # the fake launcher runs one build at a time
            after_pair=looks,
            turns=False,
        )
    finally:
        looks.close()
    assert stop is None and done == MAX_PAIRS
    quiet_builds = sorted(set(fake.builds[QUIET]))
    # decided: no more builds
    assert quiet_builds == list(range(len(quiet_builds))) and len(quiet_builds) < done
    # ... and both sides had its last pair
    assert fake.builds[QUIET].count(quiet_builds[-1]) == 2
    # undecided to the end
    assert sorted(set(fake.builds[DISAGREE])) == list(range(done))
    assert looks.lengths[DISAGREE] == LEAST_S and looks.lengths[SAMPLING] > 5 * LEAST_S
    assert any(f"{SAMPLING} {looks.lengths[SAMPLING]}" in text for text in fake.files)
    # longer builds decided it before the budget's pairs ran out
    assert len(set(fake.builds[SAMPLING])) < done


def test_chosen_once_per_case(tmp_path) -> None:
    fake = FakeLauncher(tmp_path, golden_cases())
    for build in range(4):
        for side in "AB":
            fake.run(Job([], {}, plan=BuildPlan(build, [], [], output_tag=f"{side}-b{build}")))
    a, b = (load_results([tmp_path / f"s-{side}.csv"]) for side in "AB")
    first = choose_lengths(a, b, [QUIET, SAMPLING], {}, LEAST_S, 3600)
    assert set(first) == {QUIET, SAMPLING}
    assert choose_lengths(a, b, [QUIET, SAMPLING], first, LEAST_S, 3600) == {}


def test_a_spread_that_shrinks_once_keeps_the_false_alarm_rate() -> None:
    # A/A sessions whose pairs get 3x tighter after the third pair (longer builds chosen then)
    rng = np.random.default_rng(11)
    logs = rng.normal(0, 1, (1500, 11, 40)) * 0.06
    logs[:, :, 3:] /= 3
    simulated = sq.simulate(logs, threshold=0.05)
    flagged = np.mean(((simulated.codes == sq.SLOWER) | (simulated.codes == sq.FASTER)).any(axis=1))
    assert flagged <= ALPHA
