"""Noise a user can act on: whether a run's builds disagree more than their own samples explain (a
median's error is about 1.25 sigma / sqrt(rounds), sigma = IQR / 1.349), what was seen on the
machine (busy cores, CPU steal, too many threads, bimodal builds), what it costs in resolution and
the knob to try (gpubench.reports.render.noise says it in one line)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

# scipy.stats.t.ppf without its import and per-call cost
from scipy.special import stdtrit

from gpubench.harness.core.flags import BUSY_FRAC
from gpubench.harness.core.stats import IQR_PER_SD, MEDIAN_SE_FACTOR
from gpubench.reports.judge.verdicts import ALPHA

# builds disagreeing this many times more than their samples explain are said
DISAGREE_FACTOR = 2.0
# ... and by 2% at least: below it there is nothing a user needs to change
MIN_SPREAD_LOG = 0.02
# the hypervisor took this share of the CPU or more
STEAL_FRAC = 0.05
# two groups of two builds at least
MIN_BIMODAL_BUILDS = 4


@dataclass(frozen=True)
class Readings:
    """What the command saw of the machine over the run; None where this system does not say."""

    # share of the CPU the hypervisor took (/proc/stat)
    steal_frac: float | None = None
    # 1-minute load average at the end
    load_avg: float | None = None


@dataclass(frozen=True)
class Spread:
    """How much the builds of a case disagree (log scale, median over cases), against what their own
    samples explain, and how many cases' builds fall in two groups."""

    observed_log_sd: float
    expected_log_sd: float
    cases: int
    bimodal: int

    @property
    def factor(self) -> float:
        return self.observed_log_sd / self.expected_log_sd if self.expected_log_sd > 0 else math.inf

    @property
    def disagrees(self) -> bool:
        return (
            self.cases > 0
            and self.observed_log_sd >= MIN_SPREAD_LOG
            and self.factor >= DISAGREE_FACTOR
        )


def own_log_sd(rows: pd.DataFrame) -> np.ndarray:
    """Per build, the error of its median that its own samples explain (log scale)."""
    return (
        MEDIAN_SE_FACTOR
        * rows["rel_iqr"].to_numpy(float)
        / IQR_PER_SD
        / np.sqrt(rows["rounds"].to_numpy(float))
    )


def bimodal_cut(log_medians: np.ndarray, expected_log_sd: float) -> int | None:
    """Where the sorted builds fall in two groups of two or more (the upper group's first index),
    the gap between them most of the range and far beyond the samples'; None where they do not."""
    x = np.sort(log_medians)
    if x.size < MIN_BIMODAL_BUILDS:
        return None
    gaps = np.diff(x)
    # a cut leaving two builds or more on each side
    cut = int(np.argmax(gaps[1:-1])) + 1
    gap = float(gaps[cut])
    split = (
        gap >= 0.5 * float(x[-1] - x[0])
        and gap >= 4 * DISAGREE_FACTOR * expected_log_sd
        and gap >= MIN_SPREAD_LOG
    )
    return cut + 1 if split else None


def build_spread(frame: pd.DataFrame, group: tuple[str, ...] = ("case_id",)) -> Spread:
    """The disagreement of the ok builds of each case (of each `group`: a session adds the side),
    for cases with two builds or more and a spread of their own samples."""
    ok = frame[(frame["status"] == "ok") & (frame["median_s"] > 0) & (frame["rounds"] >= 2)]
    observed, expected, split = [], [], 0
    for _, rows in ok.groupby(list(group)):
        logs = np.log(rows["median_s"].to_numpy(float))
        own = own_log_sd(rows)
        if logs.size < 2 or not np.isfinite(own).all():
            continue
        observed.append(float(np.std(logs, ddof=1)))
        expected.append(float(np.median(own)))
        split += bimodal_cut(logs, expected[-1]) is not None
    if not observed:
        return Spread(0.0, 0.0, 0, 0)
    return Spread(float(np.median(observed)), float(np.median(expected)), len(observed), split)


def run_detectable(log_sd: float, builds: int) -> float:
    """The smallest change two runs of `builds` builds each could tell from none, at 1 - ALPHA."""
    if builds < 2:
        return math.inf
    return math.expm1(
        float(stdtrit(2 * builds - 2, 1 - ALPHA / 2)) * log_sd * math.sqrt(2 / builds)
    )


def causes(frame: pd.DataFrame, readings: Readings, spread: Spread) -> tuple[list[str], list[str]]:
    """(what was seen, the knobs to try), most specific first."""
    seen, knobs = [], []
    known = {
        c
        for c in ("cpu_cores", "cpu_busy_frac", "torch_threads")
        if c in frame and frame[c].notna().any()
    }
    cores = int(frame["cpu_cores"].max()) if "cpu_cores" in known else 0
    busy = float(frame["cpu_busy_frac"].median()) if "cpu_busy_frac" in known else 0.0
    threads = int(frame["torch_threads"].max()) if "torch_threads" in known else 0
    free = max(1, round(cores * (1 - busy))) if cores else 0
    if busy > BUSY_FRAC:
        seen.append(f"other processes used {busy:.0%} of the CPU")
    if readings.steal_frac is not None and readings.steal_frac >= STEAL_FRAC:
        seen.append(f"the hypervisor took {readings.steal_frac:.0%} (CPU steal)")
    if free and threads > free:
        seen.append(f"{threads} torch threads on {free} free core(s)")
        knobs.append(f"--threads {free}")
    if spread.bimodal:
        seen.append(f"{spread.bimodal} case(s) with builds in two groups")
        if not knobs:
            knobs.append("--threads 1")
    if busy > BUSY_FRAC or (readings.steal_frac or 0) >= STEAL_FRAC:
        knobs.append("a quieter machine")
    knobs.append("a longer --budget (more builds)")
    if readings.load_avg is not None and cores:
        seen.append(f"load average {readings.load_avg:.1f} on {cores} cores")
    return seen, knobs


@dataclass(frozen=True)
class Noise:
    """Builds that disagree beyond what their own samples explain, with a knob to turn: what was
    seen, what it costs (the change two runs, or the session, could detect, and `quiet`: what they
    could with builds as steady as their samples) and the knobs to try."""

    spread: Spread
    seen: list[str]
    knobs: list[str]
    detectable: float
    quiet: float
    # what the spread is the median of: "cases", or "cases on either side" of a session
    unit: str


def judge_noise(
    frame: pd.DataFrame,
    readings: Readings,
    detectable: float | None = None,
    group: tuple[str, ...] = ("case_id",),
) -> Noise | None:
    """The noise to say, or None when the builds agree as well as their samples allow. `detectable`:
    an A/B session's median detectable change; else a comparison of two such runs'."""
    spread = build_spread(frame, group)
    seen, knobs = causes(frame, readings, spread)
    # builds as steady as their samples, or a spread with no knob besides more builds: nothing a
    # user can change
    if not (spread.disagrees or (spread.observed_log_sd >= MIN_SPREAD_LOG and len(knobs) > 1)):
        return None
    if detectable is None:
        builds = int(
            frame.loc[frame["status"] == "ok"].groupby(list(group))["build"].nunique().median()
        )
        detectable = run_detectable(spread.observed_log_sd, builds)
        quiet = run_detectable(spread.expected_log_sd, builds)
    else:
        quiet = detectable * spread.expected_log_sd / spread.observed_log_sd
    # a session's sides are judged apart
    unit = "cases" if "side" not in group else "cases on either side"
    return Noise(spread, seen, knobs, detectable, quiet, unit)
