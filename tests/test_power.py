"""The gate's power on simulated data with known truth: unchanged code must not be flagged, and
injected changes must be caught (paired sessions; unpaired runs with replicates)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import sequential_simulation as sq

from gpubench.reports.judge.paired import judge_logs, judge_session
from gpubench.reports.judge.power_audit import (
    SCENARIOS,
    Scenario,
    audit,
    inject,
    paired_judge,
    unpaired_judge,
)
from gpubench.reports.judge.verdicts import ALPHA, MACHINE_WIDE, exit_code_of

CASES = [
    f"{w}/c{i}" for w, n in (("matmul", 8), ("elementwise", 8), ("conv2d", 6)) for i in range(n)
]


def run_frame(
    run_id: str,
    rng: np.random.Generator,
    builds: int,
    level: float,
    drift: np.ndarray | None = None,
) -> pd.DataFrame:
    """One run: every case's builds, lognormal build noise (4%), the run's machine level, and a
    drift per build (shared with the other side of a pair when given)."""
    rows = []
    for index, case_id in enumerate(CASES):
        true_s = 1e-3 * (1 + index)
        for build in range(builds):
            shift = level + (drift[build] if drift is not None else 0.0)
            rows.append(
                {
                    "run_id": run_id,
                    "case_id": case_id,
                    "workload": case_id.split("/")[0],
                    "build": build,
                    "status": "ok",
                    "reason": "",
                    "median_s": true_s * float(np.exp(shift + rng.normal(0, 0.04))),
                    "samples_s": "",
                    "machine_id": "m",
                    "device": "cpu",
                    "profile": "quick",
                    "torch_version": "2",
                    "dataset": None,
                }
            )
    return pd.DataFrame(rows)


def paired_sessions(
    count: int, pairs: int, seed: int = 0
) -> list[tuple[pd.DataFrame, pd.DataFrame]]:
    rng = np.random.default_rng(seed)
    sessions = []
    for s in range(count):
        # the machine wanders during the session: both sides see it
        drift = np.cumsum(rng.normal(0, 0.03, pairs))
        sessions.append(
            (
                run_frame(f"s{s}-A", rng, pairs, 0.0, drift),
                run_frame(f"s{s}-B", rng, pairs, 0.0, drift),
            )
        )
    return sessions


def runs(count: int, seed: int = 1) -> list[pd.DataFrame]:
    rng = np.random.default_rng(seed)
    return [run_frame(f"r{r}", rng, 3, float(rng.normal(0, 0.03))) for r in range(count)]


def by_name(table: pd.DataFrame, name: str) -> dict[str, str]:
    return table.set_index("scenario").loc[name].to_dict()


def fraction(text: str) -> float:
    done, total = text.split("/")
    return int(done) / int(total)


# The scenarios the paired tests read: a session costs one judgement per injected variant, and the
# one-case x1.10, workload and x1.05/x1.15 scenarios the tests do not read were half of them.
PAIRED_SCENARIOS = tuple(
    s for s in SCENARIOS if s.name in ("A/A", "every case x1.10", "one case x1.25", "one case x2")
)


@pytest.fixture(scope="module")
def paired_table() -> pd.DataFrame:
    return audit(paired_sessions(10, 10), paired_judge, scenarios=PAIRED_SCENARIOS)


def test_paired_sessions_stay_quiet_on_unchanged_code(paired_table: pd.DataFrame) -> None:
    aa = by_name(paired_table, "A/A")
    assert fraction(aa["untouched cases flagged"]) <= 0.01 and fraction(aa["exit 1"]) <= 0.1


def test_paired_sessions_catch_a_change_of_every_case_and_of_one_case(
    paired_table: pd.DataFrame,
) -> None:
    assert fraction(by_name(paired_table, "every case x1.10")["exit 1"]) >= 0.9
    assert fraction(by_name(paired_table, "one case x1.25")["injected cases caught"]) >= 0.9
    assert fraction(by_name(paired_table, "one case x2")["injected cases caught"]) == 1.0


def test_unpaired_replicates_see_a_machine_wide_shift() -> None:
    pool = runs(12)
    comparisons = [(pd.concat(pool[i : i + 3]), pd.concat(pool[i + 3 : i + 6])) for i in (0, 6)]
    table = audit(
        comparisons,
        unpaired_judge,
        scenarios=(Scenario("A/A", 1.0, "none"), Scenario("every case x1.15", 1.15, "all")),
    )
    assert by_name(table, "every case x1.15")["exit 1"] == "2/2"
    assert by_name(table, "A/A")["exit 1"] == "0/2"


# What the audit below read on the quiet simulated runs before busy rows widened the noise instead
# of erasing the verdict: without a busy row, the rule must not cost a quiet machine any power (nor
# change a detectable figure).
QUIET_POWER = {
    "one run per side": {
        "A/A": ("0/2", "0/44", "19.9%"),
        "one case x1.25": ("27/44", "0/924", "20.2%"),
        "every case x1.15": ("0/2", "0/0", "40.0%"),
    },
    "three runs per side": {
        "A/A": ("0/1", "0/22", "12.0%"),
        "one case x1.25": ("20/22", "0/462", "12.0%"),
        "every case x1.15": ("1/1", "0/0", "12.0%"),
    },
}


def test_a_quiet_machine_keeps_its_power() -> None:
    # flags as a quiet run's rows carry them: some noisy, none busy
    pool = [
        run.assign(flags=["noisy" if i % 3 else "" for i in range(len(run))])
        for run in runs(6, seed=3)
    ]
    comparisons = {
        "one run per side": [(pool[0], pool[1]), (pool[2], pool[3])],
        "three runs per side": [(pd.concat(pool[0:3]), pd.concat(pool[3:6]))],
    }
    scenarios = tuple(s for s in SCENARIOS if s.name in QUIET_POWER["one run per side"])
    for kind, pairs in comparisons.items():
        table = audit(pairs, unpaired_judge, scenarios=scenarios).set_index("scenario")
        read = {
            name: (row["exit 1"], row["untouched cases flagged"], row["median detectable"])
            for name, row in table.iterrows()
        }
        caught = {name: row["injected cases caught"] for name, row in table.iterrows()}
        assert read == QUIET_POWER[kind], kind
        assert caught["one case x1.25"] == QUIET_POWER[kind]["one case x1.25"][0]


@pytest.mark.parametrize(
    "busy_side, verdict, code", [("base", "slower", 1), ("new", "cannot judge: busy", 6)]
)
def test_the_machine_wide_line_follows_the_busy_rule_too(busy_side, verdict, code) -> None:
    """Every case twice as slow, three runs per side, one side's rows all flagged busy: against a
    busy BASE the line that judges every case at once still fails the gate; with NEW busy the load
    alone could have done it."""
    pool = runs(6, seed=4)
    sides = {"base": pd.concat(pool[:3]), "new": inject(pd.concat(pool[3:]), CASES, 2.0)}
    sides[busy_side] = sides[busy_side].assign(flags="busy")
    verdicts = unpaired_judge(sides["base"], sides["new"], 0.05)
    assert next(v.verdict for v in verdicts if v.case_id == MACHINE_WIDE) == verdict
    assert exit_code_of(verdicts) == code


def test_an_audit_of_a_busy_new_side_counts_cannot_judge_apart_from_exit_1() -> None:
    """Unchanged code, three of NEW's cases 3x slower with their rows flagged busy (the load's
    doing, as two smoke runs once read x9.5, x6.5 and x3.8 'slower'): no case flagged, no exit 1,
    and each comparison cannot judge."""
    pool = runs(4, seed=5)

    def busy_run(run: pd.DataFrame) -> pd.DataFrame:
        slowed = inject(run, CASES[:3], 3.0)
        return slowed.assign(flags=slowed["case_id"].isin(CASES[:3]).map({True: "busy", False: ""}))

    loaded = [(pool[i], busy_run(pool[i + 1])) for i in (0, 2)]
    row = by_name(audit(loaded, unpaired_judge, scenarios=(Scenario("A/A", 1.0, "none"),)), "A/A")
    assert (row["exit 1"], row["exit 6 (cannot judge: busy)"], row["untouched cases flagged"]) == (
        "0/2",
        "2/2",
        "0/44",
    )


def test_one_run_per_side_says_the_shift_is_not_judged() -> None:
    pool = runs(2)
    verdicts = unpaired_judge(pool[0], inject(pool[1], CASES, 1.15), 0.05)
    assert [v.verdict for v in verdicts if v.case_id.startswith("(every case")] == ["not judged"]


def test_injection_scales_only_the_chosen_cases() -> None:
    frame = runs(1)[0]
    scaled = inject(frame, ["matmul/c0"], 2.0)
    changed = scaled["median_s"] / frame["median_s"]
    assert set(changed[frame["case_id"] == "matmul/c0"]) == {2.0} and set(
        changed[frame["case_id"] != "matmul/c0"]
    ) == {1.0}
    assert [s.name for s in SCENARIOS][0] == "A/A"


@pytest.mark.parametrize("jumps", [0.0, 0.1])
def test_the_paired_test_keeps_its_error_rate(jumps):
    """Yuen's trimmed test on unchanged code, 8 pairs: P(p < 0.01) stays near 0.01 — also when a
    tenth of the pairs jump ~1.7x either way (a process on a busy core)."""

    rng = np.random.default_rng(7)
    rejections = 0
    trials = 4000
    for _ in range(trials):
        logs = rng.normal(0, 0.03, 8)
        jump = rng.random(8) < jumps
        logs[jump] += rng.choice([-0.55, 0.55], jump.sum())
        rejections += judge_logs("c", logs, 0.0).p_value < 0.01
    assert rejections / trials <= 0.015


# The sequential session (gpubench ab --budget), simulated: looks after every pair, decided cases
# stop. Pair log-ratios as above (4% lognormal noise per build on each side: 0.057 per pair),
# optionally with a tenth of the pairs jumping ~1.7x either way; 11 cases, 40 pairs at most.
PAIR_NOISE, JUMP, SEQ_CASES, SEQ_PAIRS = 0.04 * np.sqrt(2), 0.55, 11, 40


def sequential_logs(
    sessions: int, effect: float = 1.0, jumps: float = 0.0, changed: int = SEQ_CASES, seed: int = 3
) -> np.ndarray:
    rng = np.random.default_rng(seed)
    logs = rng.normal(0.0, PAIR_NOISE, (sessions, SEQ_CASES, SEQ_PAIRS))
    logs[:, :changed] += np.log(effect)
    jump = rng.random(logs.shape) < jumps
    return logs + jump * rng.choice([-JUMP, JUMP], logs.shape)


def flagged(codes: np.ndarray) -> np.ndarray:
    return (codes == sq.SLOWER) | (codes == sq.FASTER)


@pytest.mark.parametrize("jumps", [0.0, 0.1])
def test_a_sequential_session_keeps_its_false_alarm_rate_with_a_look_after_every_pair(jumps):
    sim = sq.simulate(sequential_logs(1500, jumps=jumps), 0.05)
    sessions_flagged = flagged(sim.codes).any(axis=1).mean()
    print(
        f"\nA/A, jumps {jumps:.0%}: {sessions_flagged:.2%} of sessions flagged a case; no change "
        f"{np.mean(sim.codes == sq.NO_CHANGE):.1%} of cases, median {np.median(sim.pairs):.0f} "
        "pairs"
    )
    assert sessions_flagged <= ALPHA
    # unchanged cases are called so, most within the 40 pairs
    if jumps == 0.0:
        assert np.mean(sim.codes == sq.NO_CHANGE) >= 0.8


@pytest.mark.parametrize("jumps, caught, median_pairs", [(0.0, 0.95, 15), (0.1, 0.4, 40)])
def test_a_sequential_session_catches_a_ten_percent_change_and_stops_early(
    jumps, caught, median_pairs
):
    """Jumping pairs cost a mean-based rule dearly (the spread they add hides the change): the
    session then runs to its last pair for about half of the cases."""
    sim = sq.simulate(sequential_logs(300, effect=1.10, jumps=jumps), 0.05)
    print(
        f"\nevery case x1.10, jumps {jumps:.0%}: {np.mean(sim.codes == sq.SLOWER):.1%} of cases "
        f"slower, median {np.median(sim.pairs):.0f} pairs, 90th percentile "
        f"{np.percentile(sim.pairs, 90):.0f}"
    )
    assert np.mean(sim.codes == sq.SLOWER) >= caught and np.median(sim.pairs) <= median_pairs


def test_a_sequential_session_finds_the_one_changed_case_and_leaves_the_others():
    sim = sq.simulate(sequential_logs(300, effect=1.25, changed=1), 0.05)
    print(
        f"\none case x1.25: caught {np.mean(sim.codes[:, 0] == sq.SLOWER):.1%}, median "
        f"{np.median(sim.pairs[:, 0]):.0f} pairs; untouched cases flagged "
        f"{flagged(sim.codes[:, 1:]).mean():.2%}"
    )
    assert (
        np.mean(sim.codes[:, 0] == sq.SLOWER) >= 0.95 and flagged(sim.codes[:, 1:]).mean() <= ALPHA
    )


def test_the_simulation_judges_as_the_session_does():
    """Each simulated session, written as a real session's two sides (a case's rows only for the
    pairs it got), gets the same verdicts from
    gpubench.reports.judge.paired.judge_session(sequential=True), which gpubench ab prints (through
    gpubench.reports.judge.verdicts.decide, the rule compare uses too)."""
    logs = sequential_logs(6, effect=1.10, changed=4, seed=11)
    sim = sq.simulate(logs, 0.05)
    for s in range(len(logs)):
        rows = [
            (case, build, side, 1e-3 * (np.exp(logs[s, case, build]) if side == "B" else 1.0))
            for case in range(SEQ_CASES)
            for build in range(sim.pairs[s, case])
            for side in "AB"
        ]
        frame = pd.DataFrame(rows, columns=["case", "build", "side", "median_s"])
        frame["case_id"], frame["status"], frame["reason"] = (
            [f"c/{c:02d}" for c in frame["case"]],
            "ok",
            "",
        )
        session = judge_session(
            frame[frame["side"] == "A"], frame[frame["side"] == "B"], 0.05, sequential=True
        )
        words = [v.verdict for v in session.verdicts if v.case_id != MACHINE_WIDE]
        assert words == [sq.WORDS[code] for code in sim.codes[s]]
