"""A paired session that stops when it knows (`gpubench ab --budget`): after every pair it judges
both sides' files by the sequential rule (valid however often it looks), and the next pair's builds
run only the undecided cases (a cases file in each build's plan), until every case is decided, the
budget cannot fit another pair, or `--max-pairs`. Each undecided case's build length comes from the
part of its noise its builds' own samples explain and what a build costs outside its timed rounds:
chosen once, at its first look with MIN_PAIRS pairs, and kept (one spread after it)."""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from gpubench.harness.commands.common import ThrottledLine
from gpubench.harness.core.plan import MEDIAN_VAR_FACTOR, BuildNoise, best_build_s
from gpubench.harness.core.stats import IQR_PER_SD
from gpubench.harness.processes.cases_file import cases_text
from gpubench.reports.judge.load import load_results
from gpubench.harness.core.exits import UsageError
from gpubench.reports.judge.paired import judge_session, pair_logs, undecided_cases
from gpubench.reports.judge.sequential import MIN_PAIRS
from gpubench.reports.judge.verdicts import MACHINE_WIDE, Judgement
from gpubench.harness.core.console import CONSOLE

# a case's build never times more than this: a pair stays short enough to look often
MOST_BUILD_S = 2.0
# ... nor more than this share of the session's budget
BUDGET_SHARE = 0.01


@dataclass
class Looks:
    """The `after_pair` of a sequential session (ab.run_pairs): judges the pairs so far and names
    the undecided cases for the next pair's builds; `ended` says why the session ended."""

    results_dir: Path
    session_id: str
    threshold: float
    budget_s: float
    max_pairs: int
    # the session's --build-seconds: no case's builds are shorter
    least_build_s: float = 0.1
    started_s: float = field(default_factory=time.monotonic)
    ended: str = ""
    undecided: list[str] = field(default_factory=list)
    # case -> timed seconds of its builds, once chosen
    lengths: dict[str, float] = field(default_factory=dict)
    _last_look_s: float | None = None
    # a line per pair only when the undecided change
    line: ThrottledLine = field(default_factory=ThrottledLine)
    _said: str = ""
    _folder: Path | None = None
    _frames: tuple[pd.DataFrame, pd.DataFrame] = field(
        default_factory=lambda: (pd.DataFrame(), pd.DataFrame())
    )

    def __call__(self, pairs: int) -> str | None:
        now_s = time.monotonic()
        pair_s = now_s - (self._last_look_s if self._last_look_s is not None else self.started_s)
        self._last_look_s = now_s
        measured = self.judge()
        if measured is not None and not self.undecided:
            return self.end(f"every case decided after {pairs} pair(s)")
        spent_s = now_s - self.started_s
        left = (
            f"{len(self.undecided)} of {measured} case(s) undecided"
            if measured is not None
            else "no look yet"
        )
        self.line.say(
            f"pair {pairs} done ({spent_s:.0f} s of the {self.budget_s:.0f} s budget): {left}",
            changed=left != self._said,
        )
        self._said = left
        if pairs >= self.max_pairs:
            return self.end(f"--max-pairs {self.max_pairs} reached")
        # the last pair's time is the next one's estimate: no pair starts that cannot end within the
        # budget
        if spent_s + pair_s > self.budget_s:
            return self.end(
                f"budget ended: another pair (~{pair_s:.0f} s) would not fit in the "
                f"{self.budget_s:.0f} s"
            )
        if measured is None:
            return ""
        self.choose_lengths()
        return str(self.write_cases())

    def judge(self) -> int | None:
        """Judges the files; sets `undecided`; the number of cases measured on both sides (None: no
        file yet)."""
        paths = [self.results_dir / f"{self.session_id}-{name}.csv" for name in ("A", "B")]
        try:
            self._frames = load_results([paths[0]]), load_results([paths[1]])
        # a side without a row yet: every case stays selected
        except UsageError:
            return None
        session = judge_session(*self._frames, self.threshold, sequential=True)
        self.undecided = undecided_cases(session)
        return sum(
            1
            for v in session.verdicts
            if v.verdict != Judgement.BROKEN and v.case_id != MACHINE_WIDE
        )

    def write_cases(self) -> Path:
        """The undecided cases' ids, a line each, in a folder of this session's own (0700, removed
        at its end)."""
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix=f"gpubench-ab-{os.getpid()}-"))
        path, staged = self._folder / "undecided.txt", self._folder / "undecided.txt.new"
        staged.write_text(cases_text(self.undecided, self.lengths), encoding="utf-8")
        # a build reading it sees the old list or the new one, whole
        staged.replace(path)
        return path

    def choose_lengths(self) -> None:
        """Each undecided case's build length, chosen once it has enough pairs; the longer ones are
        named."""
        least_s = self.least_build_s
        new = choose_lengths(*self._frames, self.undecided, self.lengths, least_s, self.budget_s)
        self.lengths.update(new)
        longer = {
            case: s for case, s in new.items() if s > least_s and not math.isclose(s, least_s)
        }
        if longer:
            shown = ", ".join(f"{case} {s:.2g} s" for case, s in sorted(longer.items())[:4])
            more = f" and {len(longer) - 4} more" if len(longer) > 4 else ""
            CONSOLE.say(
                f"longer builds where a build's own samples are most of the noise: {shown}{more}"
            )

    def end(self, why: str) -> None:
        self.ended = why

    def close(self) -> None:
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None


def case_noise(
    a: pd.DataFrame, b: pd.DataFrame, case_id: str, logs: pd.Series
) -> BuildNoise | None:
    """What the case's ok builds on both sides showed; None with too few pairs or rows without a
    spread."""
    if len(logs) < MIN_PAIRS:
        return None
    rows = pd.concat([a[a["case_id"] == case_id], b[b["case_id"] == case_id]])
    rows = rows[(rows["status"] == "ok") & (rows["rounds"] >= 2) & (rows["round_s"] > 0)]
    if rows.empty or rows[["rel_iqr", "round_s", "build_s"]].isna().any().any():
        return None
    round_var = (rows["rel_iqr"].to_numpy(float) / IQR_PER_SD) ** 2
    own_var = float(np.median(MEDIAN_VAR_FACTOR * round_var / rows["rounds"].to_numpy(float)))
    timed_s = rows["rounds"].to_numpy(float) * rows["round_s"].to_numpy(float)
    # a pair: two builds
    between_var = max(float(np.var(logs.to_numpy(float), ddof=1)) / 2 - own_var, 0.0)
    overhead_s = float(np.median(np.maximum(rows["build_s"].to_numpy(float) - timed_s, 0.0)))
    return BuildNoise(
        between_var, float(np.median(round_var)), float(rows["round_s"].median()), overhead_s
    )


def choose_lengths(
    a: pd.DataFrame,
    b: pd.DataFrame,
    cases: list[str],
    chosen: dict[str, float],
    least_s: float,
    budget_s: float,
) -> dict[str, float]:
    """Timed seconds per build for each of `cases` that has none in `chosen` yet and can be told."""
    most_s = max(least_s, min(MOST_BUILD_S, BUDGET_SHARE * budget_s))
    logs = pair_logs(a, b)
    new = {}
    for case_id in cases:
        if case_id in chosen or case_id not in logs:
            continue
        noise = case_noise(a, b, case_id, logs[case_id])
        if noise is not None:
            new[case_id] = round(best_build_s(noise, least_s, most_s), 3)
    return new
