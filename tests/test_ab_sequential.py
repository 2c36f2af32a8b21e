"""`gpubench ab --budget`: the budget, the looks after every pair, and the narrowing of later builds
to the cases still undecided."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gpubench.harness.commands import ab
from gpubench.harness.commands.ab import AbSide, run_pairs
from gpubench.harness.commands.ab_command import session_budget_s
from gpubench.harness.commands.ab_sequential import Looks
from gpubench.harness.commands.cli import main
from gpubench.harness.processes.launch import Job
from frames import write_frame
from gpubench.reports.judge.load import LABELS, load_results

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "data" / "golden_laptop.csv"


def write_sides(
    folder: Path, pairs: int, change: dict[str, float], noise: dict[str, float]
) -> list[str]:
    """A session's two files after `pairs` pairs, from the golden run's ok cases: side B is side A
    times change[case] (1 unless given), each build with lognormal noise[case] (1% unless given).
    Returns the cases."""
    golden = load_results([GOLDEN]).drop(columns=list(LABELS))
    golden = golden[golden["status"] == "ok"].drop_duplicates("case_id")
    rng = np.random.default_rng(5)
    sides = []
    for name in "AB":
        frames = []
        for build in range(pairs):
            frame = golden.copy()
            spread = frame["case_id"].map(lambda case: noise.get(case, 0.01)).to_numpy()
            factor = (
                frame["case_id"].map(lambda case: change.get(case, 1.0)).to_numpy()
                if name == "B"
                else 1.0
            )
            frame["run_id"], frame["build"] = f"s-{name}", build
            frame["median_s"] = (
                frame["median_s"].to_numpy()
                * factor
                * np.exp(rng.normal(0, 1, len(frame)) * spread)
            )
            stamp = pd.Timestamp("2026-12-01", tz="UTC") + pd.Timedelta(seconds=20 * build)
            frame["timestamp_utc"] = stamp.isoformat()
            frames.append(frame)
        sides.append(pd.concat(frames, ignore_index=True))
    for frame in sides:
        write_frame(frame, folder / f"{frame['run_id'].iloc[0]}.csv", list(frame.columns))
    return sorted(golden["case_id"])


def test_a_budget_is_a_duration_with_its_unit():
    assert [session_budget_s(text) for text in ("90s", "5m", "1h30m", "0.5h")] == [
        90,
        300,
        5400,
        1800,
    ]
    for bad in ("300", "5 minutes", "0s", "", "m"):
        with pytest.raises(ValueError, match="use a duration"):
            session_budget_s(bad)
    with pytest.raises(ValueError, match="needs a time limit"):
        session_budget_s("none")


NOTHING = ["--device", "cpu", "--profile", "smoke", "-k", "no_case_has_this_name"]


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            ["--pairs", "5", "--budget", "5m"],
            "--pairs 5 with --budget: --pairs runs exactly N pairs",
        ),
        (["--pairs", "5", "--max-pairs", "9"], "--pairs 5 with --max-pairs"),
        (["--max-pairs", "2"], "--max-pairs 2: use 3 to 100"),
        (["--budget", "300"], "--budget '300': use a duration such as 90s, 4m, 1h or 1h30m"),
    ],
)
def test_a_bad_design_is_one_line_before_any_build(tmp_path, capsys, extra, message):
    assert main(["ab", "--results-dir", str(tmp_path / "out"), *NOTHING, *extra]) == 4
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_a_look_names_the_undecided_cases_for_the_next_builds(tmp_path):
    cases = write_sides(tmp_path, 12, change={}, noise={})
    # pairs that disagree by 30%: twelve pairs cannot decide them
    noisy = cases[:3]
    write_sides(tmp_path, 12, change={}, noise={case: 0.3 for case in noisy})
    looks = Looks(tmp_path, "s", 0.05, budget_s=3600, max_pairs=50)
    narrowed = looks(12)
    assert narrowed and looks.ended == ""
    listed = Path(narrowed)
    assert listed.read_text().split() == looks.undecided and set(looks.undecided) == set(noisy)
    looks.close()
    # the session's own folder goes with it
    assert not listed.parent.exists()


def test_a_session_ends_when_every_case_is_decided_or_the_next_pair_would_not_fit(tmp_path):
    write_sides(tmp_path, 12, change={}, noise={})
    looks = Looks(tmp_path, "s", 0.05, budget_s=3600, max_pairs=50)
    assert looks(12) is None and looks.ended == "every case decided after 12 pair(s)"
    noisy = Looks(tmp_path, "s", 0.05, budget_s=0.001, max_pairs=50)
    # four pairs: nothing can be decided yet
    write_sides(tmp_path, 4, change={}, noise={})
    assert noisy(4) is None and noisy.ended.startswith("budget ended: another pair")
    capped = Looks(tmp_path, "s", 0.05, budget_s=3600, max_pairs=4)
    assert capped(4) is None and capped.ended == "--max-pairs 4 reached"


def test_before_any_row_every_case_stays_selected(tmp_path):
    looks = Looks(tmp_path, "s", 0.05, budget_s=3600, max_pairs=50)
    assert looks(1) == "" and looks.ended == ""


@pytest.mark.process
def test_the_next_pair_runs_what_the_look_says_and_a_look_can_end_the_session(
    tmp_path, monkeypatch
):
    # tiny python builds: the session's loop only
    started: list[tuple[str, int, str]] = []

    def job(
        side: AbSide,
        session_id: str,
        build: int,
        pairs: int,
        pytest_args: list[str],
        suite_root: Path | None = None,
        turns: str = "",
        cases: str = "",
    ) -> Job:
        started.append((side.name, build, cases))
        return Job(
            [
                sys.executable,
                "-c",
                f"open({str(tmp_path)!r} + '/s-{side.name}.csv', 'a').write('rows\\n')",
            ]
        )

    monkeypatch.setattr(ab, "side_job", job)
    said = {1: "x", 2: None}
    done, stop = run_pairs(
        (AbSide("A"), AbSide("B")),
        "s",
        10,
        ["benches"],
        REPO,
        tmp_path,
        after_pair=said.__getitem__,
    )
    assert (done, stop) == (2, None)
    assert started == [("A", 0, ""), ("B", 0, ""), ("B", 1, "x"), ("A", 1, "x")]
