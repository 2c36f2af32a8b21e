"""The bulk forms of per-cell checks a store's report leans on (a thousand runs: 200,000 rows) give
the per-cell answers: raw-samples verdicts (against the samples rules' own), the text clean-up's
test, the speedup interval's rows."""

from __future__ import annotations

import pandas as pd

from gpubench.harness.records.results_reader import parse_column, within
from gpubench.reports.judge.intervals import pair_timings, speedup_interval, timings_by_machine
from gpubench.reports.judge.load import _unclean
from gpubench.reports.judge.text import CONTROL, INVISIBLE, LINE_BREAKS

SAMPLES = [
    "[]",
    "[1e-3, 2e-3]",
    "[0.001,\n 0.002]",
    " [1e-3]\t",
    "[2, 3]",
    "[-0.0]",
    "[-1e-3]",
    "[1e-10]",
    "[1e-9]",
    "[1e-9, 1000000.0]",
    "[1000000.1]",
    "[1e999]",
    "[01]",
    "[.5]",
    "[1.]",
    "[+1]",
    "[NaN]",
    "[Infinity]",
    "[[1]]",
    "[1 2]",
    "[1,,2]",
    "[1,]",
    "\x0b[1]",
    "[1]x",
    "[1]\u00a0",
    "",
    "[\u0661]",
    "{}",
    '["a"]',
    "[1e-3]",
    "[]",
    "[2e-3, 5e6]",
    "[]",
    "[3e-3,4e-3]",
    "[1E-3, 2e+0]",
    "[1, 2] [3]",
]


# what the samples rules accept (each sample in [1 ns, 10^6 s], json's own grammar): every list of
# the writer's form, an empty one, one split over lines, an empty cell
ACCEPTED = [
    "[]",
    "[1e-3, 2e-3]",
    "[0.001,\n 0.002]",
    " [1e-3]\t",
    "[2, 3]",
    "[1e-9]",
    "[1e-9, 1000000.0]",
    "",
    "[1e-3]",
    "[]",
    "[]",
    "[3e-3,4e-3]",
    "[1E-3, 2e+0]",
]


def test_samples_judged_in_bulk_are_refused_exactly_where_the_rules_refuse_them():
    _, refused = parse_column("samples_s", pd.Series(SAMPLES, dtype=object))
    assert [text for text, no in zip(SAMPLES, refused.tolist()) if not no] == ACCEPTED


def test_the_bulk_samples_check_is_sure_only_of_cells_in_bounds():
    sure = within("samples_s", SAMPLES)
    assert [text for ok, text in zip(sure, SAMPLES) if ok] == [text for text in ACCEPTED if text]
    # lists, none with a number
    assert within("samples_s", ["[]", " [ ]", "[x]"]) == [True, True, False]


def test_text_is_cleaned_exactly_where_a_pattern_finds_something_to_replace():
    texts = [f"a{chr(c)}b" for c in range(0x2200)] + ["host\u202eevil", "x\U000e0041", "ok", ""]
    assert [text for text in texts if _unclean(text)] == [
        text
        for text in texts
        if any(rule.search(text) for rule in (CONTROL, LINE_BREAKS, INVISIBLE))
    ]


def test_the_speedup_interval_from_a_pairs_rows_is_the_one_from_the_whole_frame():
    rows = [
        [m, f"r{r}", f"w/{c}", w, status, median]
        for m, scale in (("base", 2.0), ("mine", 1.0), ("other", 3.0))
        for r in range(2)
        for c in "ab"
        for w in ("w", "v")
        for status, median in (("ok", scale * (1 + r / 10)), ("failed", None), ("ok", 0.0))
    ]
    frame = pd.DataFrame(
        rows, columns=["machine", "run_id", "case_id", "workload", "status", "median_s"]
    )
    # a case the machine never ran
    frame.loc[len(frame)] = ["base", "r0", "w/c", "w", "ok", 5.0]
    timings = timings_by_machine(frame)
    for workload in (None, "w", "v"):
        whole = speedup_interval(frame, "base", "mine", workload)
        assert (
            speedup_interval(pair_timings(timings, "base", "mine"), "base", "mine", workload)
            == whole
        )
    assert speedup_interval(pair_timings(timings, "base", "gone"), "base", "gone") is None
