"""Report and compare on golden CSVs from two machines, and on constructed samples."""

import csv
import re
from pathlib import Path

import numpy as np
import pytest

from harness.cli import main
from harness.schema import COLUMNS
from reports.build import build_report
from reports.compare import compare_frames, judge, parse_threshold
from reports.load import ReportError, load_results

DATA = Path(__file__).parent / "data"
GOLDEN = [DATA / "golden_laptop.csv", DATA / "golden_h100.csv"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    return build_report(GOLDEN, out, baseline="laptop")


def test_report_links_only_plots_that_exist_and_are_pngs(report):
    text = report.read_text()
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert {"matmul_tflops.png", "elementwise_gbps.png", "mnist_epoch.png", "memory_strategies.png"} <= set(links)
    for link in links:
        assert (report.parent / link).read_bytes()[:8] == PNG_MAGIC


def test_report_has_machines_side_by_side_and_every_workload(report):
    text = report.read_text()
    machines_row = next(line for line in text.splitlines() if line.startswith("| field |"))
    assert "laptop · Intel Core i7 (cpu)" in machines_row and "h100box · NVIDIA H100 80GB HBM3 (cuda:0)" in machines_row
    for heading in ("## Matmul", "## Elementwise", "## MNIST training epoch", "## Out-of-memory strategies", "## Recommendations", "## Rows not ok"):
        assert heading in text


def test_report_states_percent_of_peak_and_speedups(report):
    text = report.read_text()
    # H100 bf16 at n=2048 in ~30 us (±2% noise) is ~572.7 TFLOP/s of a 989.4 peak: ~57.9%
    bf16 = next(line for line in text.splitlines() if "h100box" in line and "| bf16 |" in line).split("|")
    assert bf16[5].strip() == "989"
    assert 56.5 < float(bf16[6]) < 59.5
    speedup_line = next(line for line in text.splitlines() if line.startswith("| matmul | h100box"))
    assert float(speedup_line.split("|")[4]) > 100  # geomean of 200x, 267x, 667x


def test_report_gives_template_over_fastest_per_machine(report):
    lines = [l for l in report.read_text().splitlines() if "guide-template" not in l and "loader=preloaded" in l and "|" in l]
    ratio_rows = [l for l in lines if l.count("|") == 6]
    ratios = sorted(float(l.split("|")[5]) for l in ratio_rows)
    assert ratios == pytest.approx([2.25, 5.0], rel=0.05)  # 18/8 and 3/0.6


def test_non_ok_rows_are_listed_with_reasons(report):
    text = report.read_text().split("## Rows not ok")[1]
    assert "skipped" in text and "tf32 is a CUDA tensor-core mode" in text
    assert "oom" in text and "Tried to allocate 90.00 GiB" in text


def test_merged_csv_holds_every_row(report):
    with open(report.parent / "merged.csv", newline="") as handle:
        assert len(list(csv.DictReader(handle))) == 16


def test_unknown_baseline_is_an_error(tmp_path):
    with pytest.raises(ReportError, match="--baseline 'nope'"):
        build_report(GOLDEN, tmp_path, baseline="nope")


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def test_bad_inputs_are_one_line_errors_with_exit_code_2(tmp_path, capsys):
    not_ours = write_csv(tmp_path / "other.csv", ["a", "b"], [["1", "2"]])
    text = (DATA / "golden_laptop.csv").read_text()
    truncated = tmp_path / "truncated.csv"
    truncated.write_text(text[: text.index("\n", len(text) // 2) + 40])
    newer = tmp_path / "newer.csv"
    newer.write_text(text.replace("\n1,", "\n99,", 1))
    empty = write_csv(tmp_path / "empty.csv", list(COLUMNS), [])
    for path, message in ((not_ours, "not a gpubench results file"), (truncated, "truncated"), (newer, "newer gpubench"), (empty, "no result rows")):
        assert main(["report", str(path), "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err and str(path) in err


def test_older_files_load(tmp_path):
    frame = load_results([DATA])
    assert set(frame["hostname"]) == {"laptop", "h100box"}


def samples(median: float, n: int = 30, seed: int = 0) -> list[float]:
    return list(median * (1 + np.random.default_rng(seed).normal(0, 0.01, n)))


def test_a_real_20_percent_slowdown_is_caught():
    verdict = judge("case", samples(1.0, seed=1), samples(1.2, seed=2), threshold=0.05)
    assert verdict.verdict == "slower"
    assert 1.15 < verdict.ratio < 1.25 and verdict.ci_low > 1 and verdict.p_value < 0.001


def test_equal_distributions_are_not_flagged():
    verdict = judge("case", samples(1.0, seed=1), samples(1.0, seed=2), threshold=0.05)
    assert verdict.verdict == "no significant change"
    assert verdict.ci_low < 1 < verdict.ci_high


def test_a_significant_change_below_the_threshold_is_not_a_regression():
    assert judge("case", samples(1.0, seed=1), samples(1.03, seed=2), threshold=0.05).verdict == "no significant change"


def test_faster_and_too_few_samples():
    assert judge("c", samples(1.0, seed=1), samples(0.7, seed=2), 0.05).verdict == "faster"
    assert judge("c", [1.0], [2.0], 0.05).verdict == "too few samples"


def test_compare_lists_one_sided_cases(tmp_path):
    laptop = load_results([GOLDEN[0]])
    h100 = load_results([GOLDEN[1]])
    verdicts, only_base, only_new = compare_frames(laptop, h100, 0.05)
    assert len(verdicts) == 7 and only_base == [] and only_new == []
    assert all(v.verdict in ("faster", "too few samples") for v in verdicts)


def test_compare_exit_code_gates_on_slowdowns(capsys):
    assert main(["compare", str(GOLDEN[1]), str(GOLDEN[0])]) == 1  # laptop is far slower than the H100
    assert "slower" in capsys.readouterr().out
    assert main(["compare", str(GOLDEN[0]), str(GOLDEN[1]), "--threshold", "10%"]) == 0
    assert main(["compare", str(GOLDEN[0]), str(GOLDEN[1]), "--threshold", "lots"]) == 2


def test_threshold_parsing():
    assert parse_threshold("5%") == pytest.approx(0.05)
    assert parse_threshold("0.1") == pytest.approx(0.1)


def test_compile_table_derives_the_compiled_step_from_break_even():
    import pandas as pd

    from reports.tables import compile_table

    frame = pd.DataFrame([
        {"workload": "mnist_epoch", "status": "ok", "machine": "m", "setting": "compile_mode=default", "compile_mode": "default",
         "compile_s": 10.0, "eager_step_s": 0.004, "break_even_steps": 10.0 / 0.001},
        {"workload": "mnist_epoch", "status": "ok", "machine": "m", "setting": "compile_mode=max-autotune", "compile_mode": "max-autotune",
         "compile_s": 60.0, "eager_step_s": 0.004, "break_even_steps": float("nan")},
    ])
    table = compile_table(frame)
    assert table["compiled_step_s"][0] == pytest.approx(0.003) and table["gain_pct"][0] == pytest.approx(25.0)
    assert table["break_even_steps"].tolist() == ["10000", "never"]


def test_profiler_tables_beside_a_csv_reach_the_report(tmp_path):
    import json
    import shutil

    csv_path = shutil.copy(GOLDEN[1], tmp_path / "run.csv")
    ops = [{"op": "aten::convolution_backward", "device_time_us": 2120.0, "self_cpu_time_us": 1450.0, "cpu_time_us": 4000.0, "calls": 20}]
    (tmp_path / "run.ops.json").write_text(json.dumps({"mnist_epoch/guide-template": ops}))
    text = build_report([Path(csv_path)], tmp_path / "out", baseline=None).read_text()
    section = text.split("## Profiler: top operators")[1]
    assert "| aten::convolution_backward | 20 | 2.12 | 1.45 |" in section
    assert "## Profiler" not in build_report(GOLDEN, tmp_path / "plain", baseline=None).read_text()


def test_reports_read_csv_only_without_torch_or_pytest():
    """Layering: the report builder must run where torch is not installed."""
    import subprocess
    import sys

    code = "import sys, reports.build, reports.compare; bad = {'torch', 'pytest'} & set(sys.modules); sys.exit(str(bad) if bad else 0)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr + done.stdout


def test_compare_refuses_a_side_that_mixes_machines(capsys):
    assert main(["compare", str(DATA), str(GOLDEN[0])]) == 2
    assert "holds runs from 2 machines" in capsys.readouterr().err
