"""Which differences between two sides are real, judged against the noise between independent
measurements, not between rounds of one (docs/method.md, "How compare decides"). The unit is a
build's median (one epoch's windows for a case built once per run); se² = s_p²·(1/n_base + 1/n_new)
+ between², s_p pooled over both sides, between² the run-to-run noise of a ratio measured from the
scatter of all common cases' log-ratios (most cases of two runs are unchanged), never below
NOISE_FLOOR per run. t with Satterthwaite's degrees of freedom; verdicts by verdicts.decide; rows
flagged busy widen a case's noise, and a difference they alone could have made is "cannot judge:
busy" (reports/judge/busy.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from gpubench.reports.judge import replicates
from gpubench.reports.judge.busy import Busy, busy_by_case, judge_busy
from gpubench.reports.judge.modes import mode_changes
from gpubench.reports.judge.case_ids import as_new_ids
from gpubench.reports.judge.load import (
    RUN,
    broken_rows,
    load_results,
    over_budget,
    run_key,
    samples,
)
from gpubench.reports.judge.ownership import dedupe
from gpubench.reports.judge.screen import refuse_contradicting
from gpubench.harness.core.exits import UsageError

# 0.1%, not 0%
from gpubench.harness.core.percent import percent as share_percent
from gpubench.reports.judge.paired import (
    PairedSession,
    judge_session,
    judged_sequentially,
    paired_sides,
    pairing_defect,
    reach,
)
from gpubench.reports.judge.verdicts import (
    MACHINE_WIDE,
    NOISE_FLOOR,
    ONE_PROCESS_FLOOR,
    Judgement,
    Verdict,
    decide,
    exit_code_of,
    t_estimate,
)


@dataclass(frozen=True)
class SideUnits:
    """One side's measurements of one case."""

    # build medians, or one epoch's windows
    units: list[float]
    runs: int
    # "builds" | "windows"
    kind: str

    @property
    def median_s(self) -> float:
        return float(np.median(self.units))

    @property
    def logs(self) -> np.ndarray:
        return np.log(np.asarray(self.units, float))


def pooled_log_variance(base: SideUnits, new: SideUnits) -> float:
    squares = float(
        ((base.logs - base.logs.mean()) ** 2).sum() + ((new.logs - new.logs.mean()) ** 2).sum()
    )
    return squares / max(1, len(base.units) + len(new.units) - 2)


def side_of(rows: pd.DataFrame) -> SideUnits | None:
    """The units of one case on one side (ok rows only)."""
    medians = [float(m) for m in rows["median_s"] if m > 0]
    runs = int(rows["run_id"].nunique())
    if len(medians) >= 2:
        return SideUnits(medians, runs, "builds")
    if len(medians) == 1:
        windows = [s for s in samples(rows["samples_s"].iloc[0]) if s > 0]
        if len(windows) >= 2:
            return SideUnits(windows, runs, "windows")
    return None


# more runs per side than anyone will make: "over 1000", not a 138-digit count
MAX_RUNS_SHOWN = 1000


def runs_needed(detectable: float, threshold: float, runs: int) -> int:
    """Runs per side at which the floor term alone would let a threshold-sized change show
    (MAX_RUNS_SHOWN + 1 for any number beyond it)."""
    if threshold <= 0:
        return 0
    needed = runs * (detectable / threshold) ** 2
    return max(runs + 1, math.ceil(needed)) if needed <= MAX_RUNS_SHOWN else MAX_RUNS_SHOWN + 1


def judge(
    case_id: str,
    base: SideUnits,
    new: SideUnits,
    threshold: float,
    between2: float | None = None,
    between_dof: float = math.inf,
    busy2: float = 0.0,
) -> Verdict:
    """busy2: the variance busy rows add (reports/judge/busy.py), a fixed term like the floor."""
    ratio = new.median_s / base.median_s
    n_base, n_new = len(base.units), len(new.units)
    estimated = pooled_log_variance(base, new) * (1 / n_base + 1 / n_new)
    if between2 is None:
        between2 = NOISE_FLOOR**2 * (1 / base.runs + 1 / new.runs)
    se = math.sqrt(estimated + between2 + busy2)
    # Satterthwaite: each estimated part of se² carries its own degrees of freedom
    denominator = estimated**2 / max(1, n_base + n_new - 2) + (
        between2**2 / between_dof if math.isfinite(between_dof) else 0.0
    )
    dof = se**4 / denominator if denominator > 0 else math.inf
    estimate = t_estimate(math.log(ratio), se, dof)
    verdict, detectable, note = decide(estimate, threshold), estimate.detectable, ""
    if verdict == Judgement.INCONCLUSIVE:
        needed = runs_needed(detectable, threshold, max(base.runs, new.runs))
        runs = f"~{needed}" if needed <= MAX_RUNS_SHOWN else f"over {MAX_RUNS_SHOWN}"
        note = (
            f"could detect {reach(detectable)} here; {runs} runs per side would resolve "
            f"{share_percent(threshold)}"
        )
    if "windows" in (base.kind, new.kind):
        note = "; ".join(
            filter(
                None,
                [
                    note,
                    "one build per side: spread from its samples (rounds or windows), "
                    "not between builds",
                ],
            )
        )
    return Verdict.of(case_id, (base.median_s, new.median_s), estimate, verdict, note)


# fewer common cases: the between-run noise is the fixed floor
MIN_CASES_FOR_SCATTER = 8


@dataclass(frozen=True)
class RunNoise:
    """Between-run noise of a ratio, measured across the common cases of one comparison."""

    # variance of a log-ratio from run-to-run noise (what judge adds to se²)
    between2: float
    # robust sd of the cases' log-ratios around their median; None: too few cases
    scatter: float | None
    # median ratio over all common cases (machine-wide change)
    shift: float | None
    # degrees of freedom of between2 (the number of cases it came from)
    dof: float = math.inf


def run_noise(pairs: list[tuple[SideUnits, SideUnits]]) -> RunNoise:
    base_runs = max((b.runs for b, _ in pairs), default=1)
    new_runs = max((n.runs for _, n in pairs), default=1)
    floor2 = NOISE_FLOOR**2 * (1 / base_runs + 1 / new_runs)
    if len(pairs) < MIN_CASES_FOR_SCATTER:
        return RunNoise(floor2, None, None)
    logs = np.log([n.median_s / b.median_s for b, n in pairs])
    # one-step rejection, then the root mean square: robust to the few cases that really changed,
    # and about twice as efficient as the MAD alone on the unchanged majority. Around 0, not around
    # the median: with one run per side a machine-wide shift is part of the run-to-run noise (it is
    # reported apart)
    kept = robust_core(logs)
    scatter = float(np.sqrt(np.mean(kept**2)))
    return RunNoise(
        max(floor2, scatter**2),
        scatter,
        math.exp(float(np.median(logs))),
        max(1, int(kept.size) - 1),
    )


def process_variance(pairs: list[tuple[SideUnits, SideUnits]]) -> float:
    """The typical variance of one build's log-median between processes, from the cases measured
    in several builds (median over them of their pooled spread). A case with one build per run
    is judged on its rounds or windows, all from one process; the machine-wide scatter comes
    mostly from medians of several builds, so such a case gets this added for each run's one
    process (selfcheck n=256 moved 19% between two unchanged runs whose scatter was 6%)."""
    spreads = [pooled_log_variance(b, n) for b, n in pairs if b.kind == n.kind == "builds"]
    return float(np.median(spreads)) if spreads else 0.0


def robust_core(logs: np.ndarray) -> np.ndarray:
    """The values within 3 scaled MADs of their median: one case of a workload that jumped (a
    process on a busy core, ~1.7x) must not widen every other case's noise."""
    center = float(np.median(logs))
    rough = 1.4826 * float(np.median(np.abs(logs - center)))
    return logs[np.abs(logs - center) <= 3 * rough] if rough > 0 else logs


# its own between-run noise from at least 4 other cases (3 degrees of freedom)
MIN_CASES_PER_WORKLOAD = 5


def workload_noise(pairs: dict[str, tuple[SideUnits, SideUnits]]) -> dict[str, tuple[float, float]]:
    """Between-run noise of a case's ratio measured on the *other* cases of its workload: their
    log-ratios' variance around their median (case_id -> (variance, degrees of freedom)).
    Some workloads swing case by case between runs far more than the machine-wide scatter shows
    (training steps on a shared CPU: 116 vs 169 ms for one case, 44 vs 68 ms for another, in two
    runs of unchanged code, while the others moved 10%); leaving the case itself out keeps a real
    change in it from widening its own noise, and centring on the others' median keeps a change
    of the whole workload detectable."""
    by_workload: dict[str, list[str]] = {}
    for case_id in pairs:
        by_workload.setdefault(case_id.split("/", 1)[0], []).append(case_id)
    noise: dict[str, tuple[float, float]] = {}
    for cases in by_workload.values():
        if len(cases) < MIN_CASES_PER_WORKLOAD:
            continue
        logs = {c: math.log(pairs[c][1].median_s / pairs[c][0].median_s) for c in cases}
        for case_id in cases:
            others = robust_core(np.array([v for c, v in logs.items() if c != case_id]))
            variance = float(((others - np.median(others)) ** 2).sum() / max(1, others.size - 1))
            noise[case_id] = (variance, float(max(1, others.size - 1)))
    return noise


def unjudged(
    case_id: str, base_ok: pd.DataFrame, new_ok: pd.DataFrame, verdict: Judgement, note: str
) -> Verdict:
    """A verdict with no estimate behind it: the case's median on each side (NaN on a side with no
    ok row)."""
    base_s, new_s = (
        float(side.loc[side["case_id"] == case_id, "median_s"].median())
        for side in (base_ok, new_ok)
    )
    return Verdict(case_id, base_s, new_s, math.nan, None, None, None, None, verdict, note)


def not_measured(new: pd.DataFrame) -> dict[str, str]:
    """case_id -> why NEW has no figure of it: broken (load.broken_rows: failed, out of memory,
    skipped for a reason of its own, stopped by its epoch cap), or held back by NEW's run budget
    (skipped over budget, stopped short of its target by its share). A case measured in BASE is
    broken either way: one that grew too slow to fit its share is the worst slowdown, unmeasured,
    and read "only in BASE" it passed the gate. A device that cannot run a case skips it on both
    sides, so BASE has no figure of it to lose."""
    lost: dict[str, str] = {}
    broken = broken_rows(new)
    for case, why in zip(broken["case_id"], broken["reason"].fillna("")):
        lost.setdefault(case, f"ok in BASE, {why}")
    held = new[over_budget(new) | (new["status"] == "unreached")]
    for case, status, why in zip(held["case_id"], held["status"], held["reason"].fillna("")):
        lost.setdefault(case, f"{'untried' if status == 'skipped' else 'unreached'} in NEW: {why}")
    return lost


def compare_frames(
    base: pd.DataFrame, new: pd.DataFrame, threshold: float
) -> tuple[list[Verdict], list[str], list[str], list[str]]:
    """Verdicts for cases in both; the case ids only in base, only in new; notes (excluded rows)."""
    base, notes = as_new_ids(base, new)
    verdicts: list[Verdict] = []
    base_ok, new_ok = base[base["status"] == "ok"], new[new["status"] == "ok"]
    base_bad = base[base["status"].isin(["failed", "oom", "unreached"])]
    for case_id, reason in zip(base_bad["case_id"], base_bad["reason"]):
        notes.append(f"BASE {case_id} excluded: {reason}")
    lost = not_measured(new)
    for case_id in sorted(set(base_ok["case_id"]) & set(lost) - set(new_ok["case_id"])):
        verdicts.append(unjudged(case_id, base_ok, new_ok, Judgement.BROKEN, lost[case_id]))
    base_cases, new_cases = set(base_ok["case_id"]), set(new_ok["case_id"])
    sides: dict[str, tuple[SideUnits, SideUnits]] = {}
    for case_id in sorted(base_cases & new_cases):
        b, n = (
            side_of(base_ok[base_ok["case_id"] == case_id]),
            side_of(new_ok[new_ok["case_id"] == case_id]),
        )
        if b is None or n is None:
            verdicts.append(
                unjudged(
                    case_id,
                    base_ok,
                    new_ok,
                    Judgement.INCONCLUSIVE,
                    "one sample on a side: run it again (2+ runs per side) to decide",
                )
            )
            continue
        sides[case_id] = (b, n)
    busy = busy_by_case(base_ok, new_ok)
    noise = run_noise(list(sides.values()))
    verdicts = sorted(
        verdicts + judge_sides(sides, noise, threshold, busy), key=lambda v: v.case_id
    )
    widen = {case_id: b.variance for case_id, b in busy.items()}
    # runs as units: the between-run noise is each side's own
    if replicates.runs_per_side(base, new) >= 2:
        measured = {
            v.case_id: v
            for v in replicates.case_verdicts(base, new, threshold, sorted(sides), widen)
        }
        verdicts = [measured.get(v.case_id, v) for v in verdicts]
    shift = replicates.machine_wide(base, new, threshold, widen.get(MACHINE_WIDE, 0.0))
    if shift is not None:
        verdicts.append(shift)
    verdicts, busy_notes = judge_busy(verdicts, busy, threshold)
    verdicts, mode_notes = mode_changes(verdicts, base_ok, new_ok)
    notes[:0] = busy_notes + mode_notes
    if noise.scatter is not None and replicates.runs_per_side(base, new) < 2:
        notes.insert(
            0,
            f"run-to-run noise measured across {len(sides)} cases: scatter "
            f"{math.expm1(noise.scatter):.1%} per ratio; all cases moved by x{noise.shift:.3f} "
            "(median)",
        )
    broken = {v.case_id for v in verdicts if v.verdict == Judgement.BROKEN}
    return verdicts, sorted(base_cases - new_cases - broken), sorted(new_cases - base_cases), notes


def judge_sides(
    sides: dict[str, tuple[SideUnits, SideUnits]],
    noise: RunNoise,
    threshold: float,
    busy: dict[str, Busy],
) -> list[Verdict]:
    """Each case against the wider of the machine's and its workload's between-run noise, plus what
    its busy rows add."""
    own = workload_noise(sides)
    # at least ONE_PROCESS_FLOOR per run: two quick runs of unchanged code moved the template epoch
    # 15% and the DDP steps 24% here, far beyond what the micro cases' build-to-build spread says
    process2 = max(process_variance(list(sides.values())), ONE_PROCESS_FLOOR**2)
    verdicts = []
    for case_id, (b, n) in sides.items():
        # the wider of the two
        between2, dof = max((noise.between2, noise.dof), own.get(case_id, (0.0, math.inf)))
        # one build per run: its own samples cannot see process-to-process noise (already inside a
        # workload scatter that won, when its cases are built once per run too)
        if "windows" in (b.kind, n.kind) and between2 == noise.between2:
            between2 += process2 * (1 / b.runs + 1 / n.runs)
        busy2 = busy[case_id].variance if case_id in busy else 0.0
        verdicts.append(judge(case_id, b, n, threshold, between2, dof, busy2))
    return verdicts


def one_machine(frame: pd.DataFrame, path: Path) -> pd.DataFrame:
    """Builds pool per case within a side, so a side must hold a single machine's runs."""
    machines = sorted(set(frame["machine_id"]))
    if len(machines) > 1:
        raise UsageError(
            f"{path}: holds runs from {len(machines)} machines ({', '.join(machines)}) "
            "— compare one machine's runs per side"
        )
    return frame


def device_of(frame: pd.DataFrame) -> pd.Series:
    """A row's device: its kind (cpu, cuda, mps) and model, so cuda:0 and cuda:1 of one model are
    one."""
    return (
        frame["device"].astype(str).str.split(":").str[0] + " · " + frame["device_name"].astype(str)
    )


def same_devices(
    base: pd.DataFrame, new: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """Like for like: against another device a ratio measures the hardware, not the code. Sides
    with no device in common are refused; rows on a device only one side ran on are not judged
    (noted); with several common devices a case is judged per device, never pooled across them."""
    base_device, new_device = device_of(base), device_of(new)
    common = set(base_device) & set(new_device)
    if not common:
        raise UsageError(
            f"BASE ran on {', '.join(sorted(set(base_device)))}, NEW on "
            f"{', '.join(sorted(set(new_device)))}: across devices a verdict would judge the "
            "hardware, not the code — compare runs of one device (gpubench report compares "
            "machines)"
        )
    notes = [
        f"note: {len(devices)} rows on {', '.join(sorted(set(devices)))} (only in {side}) not "
        "judged: against another device a ratio is the hardware's"
        for side, devices in (
            ("BASE", base_device[~base_device.isin(common)]),
            ("NEW", new_device[~new_device.isin(common)]),
        )
        if len(devices)
    ]
    base, new = base[base_device.isin(common)], new[new_device.isin(common)]
    if len(common) > 1:
        base, new = (
            side.assign(case_id=side["case_id"] + " @ " + device_of(side)) for side in (base, new)
        )
    return base, new, notes


def side_differences(base: pd.DataFrame, new: pd.DataFrame) -> list[str]:
    """What differs between the sides besides the code: a verdict across machines, profiles,
    devices, thread counts or the epoch race's winners compares those too."""
    notes = []
    for column, what in (
        ("machine_id", "machines"),
        ("device", "devices"),
        ("profile", "profiles"),
        ("torch_version", "torch versions"),
        ("dataset", "datasets (and so time-to-accuracy targets)"),
    ):
        b, n = sorted(set(base[column].dropna())), sorted(set(new[column].dropna()))
        if b != n:
            notes.append(
                f"note: the sides differ in {what} (BASE {', '.join(map(str, b))}; NEW "
                f"{', '.join(map(str, n))}): the verdicts compare that too"
            )
    threads = [
        ", ".join(
            map(str, sorted(set(side.get("torch_threads", pd.Series()).dropna().astype(int))))
        )
        for side in (base, new)
    ]
    # a side that did not record it (an old file) is not said to differ
    if all(threads) and threads[0] != threads[1]:
        notes.append(
            f"note: the sides ran with different torch threads (BASE {threads[0]}; NEW "
            f"{threads[1]}): a different thread count is a different configuration, and the "
            "verdicts judge it with the code — pass the same --threads N to both runs to judge "
            "the code alone"
        )
    # two nodes given one --run-id are two runs
    if set(run_key(base)) == set(run_key(new)):
        notes.append(same_run_note(base, new))
    return notes + race_differences(base, new)


def same_run_note(base: pd.DataFrame, new: pd.DataFrame) -> str:
    """The sides name the same run(s): one run given twice when their common rows hold the same
    figures; else a file that took another run's id (a copy edited, a member's run id reused), which
    the verdicts judge as a run apart."""
    keys = [*RUN, "case_id", "build"]
    common = base[[*keys, "median_s"]].merge(
        new[[*keys, "median_s"]], on=keys, suffixes=("_base", "_new")
    )
    differ = ~(
        common["median_s_base"].eq(common["median_s_new"])
        | (common["median_s_base"].isna() & common["median_s_new"].isna())
    )
    if not differ.any():
        return "note: BASE and NEW are the same run(s)"
    ids = ", ".join(sorted(set(base["run_id"].astype(str))))
    return (
        f"note: BASE and NEW both name run(s) {ids}, but {int(differ.sum())} of their "
        f"{len(common)} common rows hold other figures: not one run (a copy edited, or another "
        "run given its id) — judged as two runs"
    )


def race_winners(side: pd.DataFrame) -> dict[str, str]:
    """A raced case (the epoch race) -> the precision and memory format its race picked on this
    side."""
    if not {"raced", "precision", "channels_last"} <= set(side.columns):
        return {}
    raced = side[(side["status"] == "ok") & side["raced"].eq(True)]
    picked: dict[str, set[str]] = {}
    for case, precision, channels_last in zip(
        raced["case_id"], raced["precision"], raced["channels_last"].eq(True)
    ):
        picked.setdefault(case, set()).add(
            f"{precision}{' channels_last' if channels_last else ''}"
        )
    return {case: " or ".join(sorted(settings)) for case, settings in picked.items()}


def race_differences(base: pd.DataFrame, new: pd.DataFrame) -> list[str]:
    """A note per raced case whose race picked another setting on each side: its verdict stands
    (each side ran the fastest setting its race found, which is what the case measures), and says it
    compares the winners too."""
    picked = race_winners(base), race_winners(new)
    return [
        f"note: {case}: the epoch race picked {picked[0][case]} in BASE, {picked[1][case]} in "
        "NEW: its verdict compares the races' winners too (each side ran the setting its race "
        "chose)"
        for case in sorted(set(picked[0]) & set(picked[1]))
        if picked[0][case] != picked[1][case]
    ]


@dataclass(frozen=True)
class Comparison:
    """What `gpubench compare` found between two files: the sides of one paired session judged
    paired (`session`, `sides`), else their cases judged unpaired with the notes on what else
    differs."""

    verdicts: list[Verdict]
    only_base: list[str]
    only_new: list[str]
    notes: list[str]
    session: PairedSession | None = None
    sides: tuple[str, str] = ("A", "B")

    @property
    def exit_code(self) -> int:
        """1 when any case is significantly slower (or broke), or every case is (the machine-wide
        line); else 6 when busy rows alone could have made a difference seen."""
        return self.session.exit_code if self.session is not None else exit_code_of(self.verdicts)


def judge_paths(base: Path, new: Path, threshold: float) -> Comparison:
    """Two files judged as compare judges them. The two sides of a paired session are judged paired
    (in either order), unless their rows show they are not one session's pairs."""
    paired_notes = []
    sides = paired_sides(base, new)
    base_rows, new_rows = load_results([base]), load_results([new])
    # files from anywhere: a row whose median contradicts its own rate is refused, never judged
    refuse_contradicting(base_rows, new_rows)
    if sides:
        problem = pairing_defect(base_rows, new_rows)
        if problem is None:
            session = judge_session(
                base_rows, new_rows, threshold, sides, judged_sequentially(base)
            )
            return Comparison(session.verdicts, [], [], session.notes, session, sides)
        paired_notes.append(
            f"note: {base.name} and {new.name} are named as a paired session's sides, but "
            f"{problem}: judged unpaired"
        )
    base_frame, base_notes = dedupe(one_machine(base_rows, base))
    new_frame, new_notes = dedupe(one_machine(new_rows, new))
    differences = side_differences(base_frame, new_frame)
    base_frame, new_frame, device_notes = same_devices(base_frame, new_frame)
    verdicts, only_base, only_new, notes = compare_frames(base_frame, new_frame, threshold)
    notes = paired_notes + differences + device_notes + notes
    if not verdicts:
        raise UsageError(
            f"no case in common between {base} and {new} "
            "— compare runs of the same cases (same profile and device)"
        )
    return Comparison(verdicts, only_base, only_new, base_notes + new_notes + notes)
