"""No impossible figure reaches the report's summary, its answer or the health verdicts: rows its
writer flagged `impossible`, and older rows the report bounds itself (gpubench.harness.core.bounds),
are left out with why, and kept in the tables. Small shares read with their digits; a self-check
that never ran reads skipped; a bandwidth whose builds fall in two groups says so."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from gpubench.harness.core.bounds import past_bounds
from gpubench.harness.core.percent import percent
from gpubench.harness.records.results import ResultsWriter
from gpubench.harness.records.schema import SCHEMA_VERSION
from gpubench.reports.render.build import build_report
from gpubench.reports.judge.load import load_results, write_merged
from gpubench.reports.judge.screen import left_out
from gpubench.reports.render.units import human

# These tests read the report's text, not its pixels (conftest.unrendered_plots).
pytestmark = pytest.mark.usefixtures("unrendered_plots")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "reports" / "examples"
CPU = {
    "schema_version": SCHEMA_VERSION,
    "run_id": "run",
    "machine_id": "m",
    "hostname": "vm",
    "device": "cpu",
    "device_name": "AMD EPYC",
    "torch_version": "2.9.0",
    "build": 0,
    "builds": 1,
    "status": "ok",
    "rounds": 5,
    "rel_iqr": 0.01,
}
IMPOSSIBLE_DDP = (
    "impossible: scaling efficiency 3.03 > 1.05 — another job shared the machine during one of the "
    "runs"
)


def report_of(tmp_path: Path, rows: list[dict]) -> str:
    writer = ResultsWriter(tmp_path, "run")
    for row in rows:
        writer.append(dict(CPU, **row))
    writer.close()
    return build_report([tmp_path / "run.csv"], tmp_path / "out", None).read_text(encoding="utf-8")


def section_of(text: str, title: str) -> str:
    return text.split(f"## {title}")[1].split("\n## ")[0]


def ddp_rows(efficiency: float, flags: str, reason: str) -> list[dict]:
    ddp = {
        "workload": "ddp",
        "parallel": "ddp",
        "backend": "gloo",
        "batch_size": 128,
        "median_s": 0.06,
        "samples_s": [0.06],
    }
    return [
        dict(
            ddp,
            case_id="ddp/ddp-x1-gloo-bs128",
            world_size=1,
            samples_per_s=2000.0,
            scaling_efficiency=1.0,
        ),
        dict(
            ddp,
            case_id="ddp/ddp-x2-gloo-bs128",
            world_size=2,
            samples_per_s=2000.0 * 2 * efficiency,
            scaling_efficiency=efficiency,
            flags=flags,
            reason=reason,
        ),
    ]


@pytest.mark.parametrize(
    "flags, reason",
    [
        # flagged by its writer
        ("noisy;impossible", f"samples are rank 0's step times; {IMPOSSIBLE_DDP}"),
        # an older row: the report bounds it itself
        ("noisy", "samples are rank 0's step times"),
    ],
    ids=["flagged", "older-row"],
)
def test_a_scaling_efficiency_past_its_bound_is_left_out_of_the_summary_with_why(
    tmp_path, flags, reason
):
    text = report_of(tmp_path, ddp_rows(3.03, flags, reason))
    summary = section_of(text, "Summary")
    assert "3.03 efficiency" not in summary and "3.03 efficiency" not in text.split("## Summary")[0]
    assert f"vm · AMD EPYC (cpu), `ddp/ddp-x2-gloo-bs128`: left out — {IMPOSSIBLE_DDP}" in summary
    # the row left out still counts as flagged
    assert "| flagged · not ok rows | 1 · 0 |" in summary
    # kept in its table, with its samples in the CSV
    assert "303" in section_of(text, "Multi-process training")


def test_a_scaling_efficiency_within_its_bound_is_a_headline(tmp_path):
    summary = section_of(report_of(tmp_path, ddp_rows(0.57, "", "")), "Summary")
    assert "0.57 efficiency at 2 processes" in summary and "left out" not in summary


def transformer_row(setting: str, tokens_per_s: float, mfu: float, **more: object) -> dict:
    return dict(
        {
            "workload": "transformer",
            "case_id": f"transformer/{setting}",
            "model": "tiny",
            "precision": "fp32",
            "compile_mode": "none",
            "sdpa_backend": "math",
            "optimizer": "adamw",
            "batch_size": 8,
            "seq_len": 64,
            "median_s": 512 / tokens_per_s,
            "samples_s": [512 / tokens_per_s],
            "tokens_per_s": tokens_per_s,
            "mfu": mfu,
            "measured_peak_tflops": 0.2,
        },
        **more,
    )


def test_mfu_above_1_reaches_neither_the_answer_nor_the_summary_and_a_small_one_keeps_its_digits(
    tmp_path,
):
    """A smoke transformer under load: its MFU against a matmul reference measured while busy read
    above 1."""
    # no flag: an older row
    text = report_of(
        tmp_path,
        [
            transformer_row("tiny-fp32-math", 9e4, 1.4),
            transformer_row("tiny-bf16-math", 4e4, 0.00042, precision="bf16"),
        ],
    )
    answer, summary = text.split("\n")[2], section_of(text, "Summary")
    assert (
        answer.startswith("**Answer:**")
        and "tiny-bf16-math" in answer
        and "tiny-fp32-math" not in answer
    )
    cell = next(
        line
        for line in summary.splitlines()
        if line.startswith("| tiny transformer step, fastest |")
    )
    assert "(tiny-bf16-math), MFU 0.042% of its build's bf16 matmul (0.2 TFLOP/s) (95%" in cell
    assert (
        "`transformer/tiny-fp32-math`: left out — impossible: MFU 140% is above the whole peak"
        in summary
    )


def test_a_dram_figure_above_the_device_peak_gets_no_health_verdict(tmp_path):
    h200 = load_results([EXAMPLES / "h200-quick.csv"])
    big = (h200["workload"] == "elementwise") & (h200["size"] == 2**28)
    # 6514 GB/s, above the H200's 4800: a row of a writer without the flag
    h200.loc[big, "gbps"] *= 1.5
    # the sizes past 4x the L2 read DRAM (the smaller ones, launch-bound on a GPU, are no memory
    # figure)
    h200.loc[(h200["workload"] == "elementwise") & (h200["size"] >= 2**24), "memory_tier"] = "dram"
    write_merged(
        h200.drop(
            columns=["machine", "setting", "source_file", "source_path", "source_line"],
            errors="ignore",
        ),
        tmp_path / "h200.csv",
    )
    text = build_report([tmp_path / "h200.csv"], tmp_path / "out", None).read_text(encoding="utf-8")
    health = section_of(text, "Health against references")
    dram = next(
        line for line in health.splitlines() if "| memory bandwidth (DRAM) (GB/s) |" in line
    )
    # the next DRAM size, 2^24, within the peak
    assert "6514" not in dram and "| 4020 |" in dram
    summary = section_of(text, "Summary")
    assert "| memory bandwidth (DRAM) | 4020 GB/s (95% " in summary
    assert (
        "elementwise/add-fp32-2^28: left out — impossible: 6514 GB/s is above the memory "
        "datasheet peak 4800 GB/s"
    ) in summary


def test_the_bounds_say_which_figure_and_why():
    assert past_bounds({"scaling_efficiency": 1.04, "mfu": 0.99}, "", "") == []
    assert past_bounds({"mfu": 1.2}, "AMD EPYC", "fp32") == [
        "impossible: MFU 120% is above the whole peak — the timing missed device work, or the "
        "measured matmul reference was slowed by another job"
    ]
    h100 = "NVIDIA H100 80GB HBM3"
    # an L2 may beat the memory
    assert past_bounds({"gbps": 5000.0, "memory_tier": "cache"}, h100, "fp32") == []
    assert past_bounds({"pct_of_peak": 140.0}, "AMD EPYC", "fp32") == [
        "impossible: 140% of the datasheet peak — the timing missed device work"
    ]


def test_the_committed_examples_leave_nothing_out():
    assert left_out(load_results([EXAMPLES], [])).isna().all()


@pytest.mark.parametrize(
    "share, text",
    [
        (0.57, "57%"),
        (0.0004, "0.04%"),
        (0.000412, "0.041%"),
        (0.005, "0.5%"),
        (0.0, "0%"),
        (-0.003, "-0.3%"),
    ],
)
def test_a_small_share_keeps_its_digits(share, text):
    assert percent(share) == text


def test_tables_print_small_shares_with_their_digits():
    assert human(0.0004, "frac") == "0.04%" and human(0.571, "frac") == "57.1%"
    assert human(0.04, "%") == "0.04%" and human(57.14, "%") == "57.1%"


def test_a_self_check_that_never_ran_reads_skipped(tmp_path):
    check = {"workload": "selfcheck", "dtype": "fp32"}
    text = report_of(
        tmp_path,
        [
            dict(
                check,
                case_id="selfcheck/fp32-n256",
                size=256,
                median_s=2e-4,
                samples_s=[2e-4],
                tflops=0.17,
                selfcheck_tub_ratio=1.0,
                reason="41 interleaved pairs of 48 calls",
            ),
            dict(
                check,
                case_id="selfcheck/fp32-n1024",
                size=1024,
                status="skipped",
                reason="over budget: its share of the 5m budget is 0.0 s",
            ),
            dict(
                check,
                case_id="selfcheck/fp32-n2048",
                size=2048,
                median_s=0.1,
                samples_s=[0.1],
                tflops=0.17,
                flags="busy",
                reason="selfcheck inconclusive: machine busy (other processes used 60% of the CPU)",
            ),
        ],
    )
    table = section_of(text, "Timer self-check")
    assert "| vm · AMD EPYC (cpu) | 256 | ok | 1 | 0 |" in table
    # not "builds 1, failed 0": it never ran
    assert "| vm · AMD EPYC (cpu) | 1024 | skipped | 0 | 0 |" in table
    assert "| vm · AMD EPYC (cpu) | 2048 | inconclusive | 1 | 0 |" in table


def elementwise_builds(gbps: list[float]) -> list[dict]:
    moved = 3 * 4 * 2**25
    return [
        {
            "workload": "elementwise",
            "case_id": "elementwise/add-fp32-2^25",
            "op": "add",
            "dtype": "fp32",
            "size": 2**25,
            "memory_tier": "dram",
            "build": b,
            "builds": len(gbps),
            "gbps": g,
            "median_s": moved / g / 1e9,
            "samples_s": [moved / g / 1e9],
        }
        for b, g in enumerate(gbps)
    ]


def test_a_bandwidth_whose_builds_fall_in_two_groups_says_the_split(tmp_path):
    """The DRAM headline seen at 45.4 GB/s ±50%: builds of 29-36 and of 51-59 GB/s. The figure is
    the faster group's: the slower one shared the memory with someone else."""
    summary = section_of(
        report_of(tmp_path, elementwise_builds([29.0, 31.0, 33.0, 58.0, 59.0, 60.0])), "Summary"
    )
    line = next(
        line for line in summary.splitlines() if line.startswith("| memory bandwidth (DRAM)")
    )
    assert line == (
        "| memory bandwidth (DRAM) | 59 GB/s, the faster builds; builds in two groups: 29–33 and "
        "58–60 GB/s |"
    )


def test_a_bandwidth_whose_builds_agree_keeps_its_spread(tmp_path):
    summary = section_of(
        report_of(tmp_path, elementwise_builds([30.0, 31.0, 32.0, 33.0])), "Summary"
    )
    assert (
        "| memory bandwidth (DRAM) | 31.5 GB/s (95% 28.8–34.4) |" in summary
        and "two groups" not in summary
    )


def test_left_out_reads_pandas_frames_without_the_new_columns():
    frame = pd.DataFrame(
        {
            "status": ["ok", "ok"],
            "workload": ["ddp", "matmul"],
            "scaling_efficiency": [2.0, None],
            "flags": ["", "impossible"],
            "reason": ["", "x; impossible: 2000 TFLOP/s; y"],
        }
    )
    reasons = left_out(frame)
    assert reasons[0].startswith("impossible: scaling efficiency 2.00 > 1.05")
    # the writer's own words
    assert reasons[1] == "impossible: 2000 TFLOP/s"
