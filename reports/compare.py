"""Which differences between two runs are real: ratio of medians, a bootstrap confidence
interval from the raw samples, and a Mann–Whitney U test (as asv/pyperf do before calling a
regression)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as sps

from reports.load import ReportError, load_results

ALPHA = 0.05
MIN_SAMPLES = 3
BOOTSTRAP_RESAMPLES = 2000


@dataclass(frozen=True)
class Verdict:
    case_id: str
    base_median_s: float
    new_median_s: float
    ratio: float  # new / base: above 1 is slower
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    verdict: str  # faster | slower | no significant change | too few samples


def parse_threshold(text: str) -> float:
    """'5%' or '0.05' -> 0.05."""
    try:
        value = float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        raise ReportError(f"bad --threshold {text!r}: use a percentage such as 5%") from None
    if not 0 <= value < 10:
        raise ReportError(f"bad --threshold {text!r}: use a percentage such as 5%")
    return value


def bootstrap_ratio_ci(base: np.ndarray, new: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of median(new)/median(base), resampling each side."""
    rng = np.random.default_rng(seed)
    base_medians = np.median(rng.choice(base, (BOOTSTRAP_RESAMPLES, base.size)), axis=1)
    new_medians = np.median(rng.choice(new, (BOOTSTRAP_RESAMPLES, new.size)), axis=1)
    ratios = new_medians / base_medians
    return float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5))


def judge(case_id: str, base: list[float], new: list[float], threshold: float) -> Verdict:
    """Slower/faster only when the test is significant, the interval excludes 1, and the change
    exceeds the threshold; otherwise no significant change."""
    b, n = np.asarray(base, float), np.asarray(new, float)
    ratio = float(np.median(n) / np.median(b))
    if b.size < MIN_SAMPLES or n.size < MIN_SAMPLES:
        return Verdict(case_id, float(np.median(b)), float(np.median(n)), ratio, None, None, None, "too few samples")
    low, high = bootstrap_ratio_ci(b, n)
    p_value = float(sps.mannwhitneyu(b, n, alternative="two-sided").pvalue)
    verdict = "no significant change"
    if p_value < ALPHA and low > 1 and ratio > 1 + threshold:
        verdict = "slower"
    elif p_value < ALPHA and high < 1 and ratio < 1 / (1 + threshold):
        verdict = "faster"
    return Verdict(case_id, float(np.median(b)), float(np.median(n)), ratio, low, high, p_value, verdict)


def pooled_samples(frame: pd.DataFrame) -> dict[str, list[float]]:
    """Raw samples per case over every ok row (several runs of one side pool together)."""
    ok = frame[frame["status"] == "ok"]
    pooled: dict[str, list[float]] = {}
    for case_id, samples in zip(ok["case_id"], ok["samples"]):
        pooled.setdefault(case_id, []).extend(samples)
    return {k: v for k, v in pooled.items() if v}


def compare_frames(base: pd.DataFrame, new: pd.DataFrame, threshold: float) -> tuple[list[Verdict], list[str], list[str]]:
    """Verdicts for cases in both; the case ids only in base, only in new."""
    b, n = pooled_samples(base), pooled_samples(new)
    common = sorted(set(b) & set(n))
    return [judge(c, b[c], n[c], threshold) for c in common], sorted(set(b) - set(n)), sorted(set(n) - set(b))


def format_comparison(verdicts: list[Verdict], only_base: list[str], only_new: list[str], threshold: float) -> str:
    lines = ["| case | base median | new median | new/base | 95% CI | p | verdict |", "|---|---:|---:|---:|---|---:|---|"]
    for v in verdicts:
        ci = f"{v.ci_low:.3f}–{v.ci_high:.3f}" if v.ci_low is not None else "—"
        p = f"{v.p_value:.3g}" if v.p_value is not None else "—"
        lines.append(f"| {v.case_id} | {fmt_seconds(v.base_median_s)} | {fmt_seconds(v.new_median_s)} | {v.ratio:.3f} | {ci} | {p} | {v.verdict} |")
    counts = {k: sum(v.verdict == k for v in verdicts) for k in ("slower", "faster", "no significant change", "too few samples")}
    lines.append("")
    lines.append(f"{len(verdicts)} cases compared (threshold {threshold:.0%}): " + ", ".join(f"{n} {k}" for k, n in counts.items()))
    if only_base:
        lines.append(f"only in BASE ({len(only_base)}): " + ", ".join(only_base))
    if only_new:
        lines.append(f"only in NEW ({len(only_new)}): " + ", ".join(only_new))
    return "\n".join(lines)


def fmt_seconds(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def one_machine(frame: pd.DataFrame, path: Path) -> pd.DataFrame:
    """Samples pool per case within a side, so a side must hold a single machine's runs."""
    machines = sorted(set(frame["machine_id"]))
    if len(machines) > 1:
        raise ReportError(f"{path}: holds runs from {len(machines)} machines ({', '.join(machines)}) — compare one machine's runs per side")
    return frame


def compare_paths(base: Path, new: Path, threshold: float) -> tuple[str, int]:
    """Text for the terminal and the exit code: 1 when any case is significantly slower."""
    verdicts, only_base, only_new = compare_frames(one_machine(load_results([base]), base), one_machine(load_results([new]), new), threshold)
    code = 1 if any(v.verdict == "slower" for v in verdicts) else 0
    return format_comparison(verdicts, only_base, only_new, threshold), code
