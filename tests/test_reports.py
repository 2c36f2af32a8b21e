"""Report and compare on golden CSVs from two machines, and on constructed samples."""

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from unrendered import plots_unrendered

from gpubench.harness.commands.cli import main
from gpubench.harness.records.results import ResultsWriter
from gpubench.harness.records.schema import COLUMNS, SCHEMA_VERSION
from gpubench.reports.render.build import build_report
from gpubench.reports.judge.verdicts import ALPHA
from gpubench.reports.judge.compare import SideUnits, compare_frames, judge, run_noise, side_of
from gpubench.reports.judge.load import load_results, machine_labels, result_files
from gpubench.reports.judge.verdicts import parse_threshold
from gpubench.harness.core.exits import UsageError
from gpubench.reports.judge.tables import compile_table, not_ok_grouped, template_vs_fastest

DATA = Path(__file__).parent / "data"
GOLDEN = [DATA / "golden_laptop.csv", DATA / "golden_h100.csv"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """The golden runs' report; its tests read its text and links, not its pixels."""
    out = tmp_path_factory.mktemp("report")
    with plots_unrendered():
        return build_report(GOLDEN, out, baseline="laptop")


def test_report_links_only_plots_that_exist_and_are_pngs(report):
    text = report.read_text()
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert {
        "matmul_tflops.png",
        "elementwise_gbps.png",
        "mnist_epoch.png",
        "memory_strategies.png",
    } <= set(links)
    for link in links:
        assert (report.parent / link).read_bytes()[:8] == PNG_MAGIC


def test_report_has_machines_side_by_side_and_every_workload(report):
    text = report.read_text()
    machines_row = next(line for line in text.splitlines() if line.startswith("| part |"))
    assert (
        "laptop · Intel Core i7 (cpu)" in machines_row
        and "h100box · NVIDIA H100 80GB HBM3 (cuda:0)" in machines_row
    )
    for heading in (
        "## Matmul",
        "## Elementwise",
        "## MNIST training epoch",
        "## Out-of-memory strategies",
        "## Recommendations",
        "## Rows not ok",
    ):
        assert heading in text


def test_report_states_percent_of_peak_and_speedups(report):
    text = report.read_text()
    # H100 bf16 at n=2048 in ~30 us (±2% noise) is ~572.7 TFLOP/s of a 989.4 peak: ~57.9% a row per
    # dtype, a column per machine: 'x TFLOP/s at n=2048, 57.9% of 989 TFLOP/s peak (1 build)'
    header = next(line for line in text.splitlines() if line.startswith("| dtype |")).split(" | ")
    bf16 = next(line for line in text.splitlines() if line.startswith("| bf16 |")).split(" | ")
    cell = bf16[next(i for i, name in enumerate(header) if "h100box" in name)]
    share = re.search(r", ([\d.]+)% of 989 TFLOP/s peak", cell)
    assert share and 56.5 < float(share.group(1)) < 59.5, cell
    speedup_line = next(line for line in text.splitlines() if line.startswith("| matmul | h100box"))
    # geomean of 200x, 267x, 667x
    assert float(speedup_line.split("|")[4]) > 100


def test_report_gives_template_over_fastest_per_machine(report):
    table = template_vs_fastest(load_results(GOLDEN))
    # 18/8 and 3/0.6
    assert sorted(table["template_over_fastest"]) == pytest.approx([2.25, 5.0], rel=0.05)
    assert set(table["fastest_setting"]) == {"preloaded"}
    assert (
        "Guide template against the fastest setting whose test accuracy is within 0.01"
        in report.read_text()
    )


def epoch_rows(rows):
    return pd.DataFrame(
        [
            dict(
                {
                    "workload": "mnist_epoch",
                    "status": "ok",
                    "machine": "m",
                    "dataset": "fashion-mnist",
                    "flags": "",
                    "rel_iqr": 0.01,
                    "data_wait_frac": 0.0,
                    "peak_mem_bytes": 1.0,
                    "compile_s": None,
                },
                **r,
            )
            for r in rows
        ]
    )


def test_fastest_is_at_equal_accuracy_and_a_faster_less_accurate_setting_is_listed_apart():
    frame = epoch_rows(
        [
            {
                "setting": "guide-template",
                "epoch_s": 3.46,
                "samples_per_s": 1.0,
                "test_accuracy": 0.862,
            },
            {
                "setting": "preloaded-bf16-cl",
                "epoch_s": 0.40,
                "samples_per_s": 1.0,
                "test_accuracy": 0.858,
            },
            {
                "setting": "preloaded-bf16-cl-bs1024",
                "epoch_s": 0.26,
                "samples_per_s": 1.0,
                "test_accuracy": 0.824,
            },
        ]
    )
    (row,) = template_vs_fastest(frame).to_dict("records")
    assert row["fastest_setting"] == "preloaded-bf16-cl" and row[
        "template_over_fastest"
    ] == pytest.approx(3.46 / 0.40)
    assert row["faster_but_less_accurate"] == "preloaded-bf16-cl-bs1024 (0.824)"


def test_a_diverged_run_is_never_fastest(tmp_path):
    """A diverged epoch is a failed row (gpubench.harness.measurement.runner.Diverged): the report
    skips it and lists it."""
    frame = epoch_rows(
        [
            {
                "setting": "guide-template",
                "epoch_s": 17.0,
                "samples_per_s": 1.0,
                "test_accuracy": 0.86,
            },
            {"setting": "preloaded", "epoch_s": 12.0, "samples_per_s": 1.0, "test_accuracy": 0.857},
            {
                "setting": "preloaded-bs1024",
                "epoch_s": 2.0,
                "samples_per_s": 1.0,
                "test_accuracy": 0.10,
                "status": "failed",
                "reason": "diverged: train_loss is nan",
                "case_id": "mnist_epoch/preloaded-bs1024",
            },
        ]
    )
    assert template_vs_fastest(frame)["fastest_setting"].tolist() == ["preloaded"]
    assert "diverged" in not_ok_grouped(frame.assign(setting=frame["setting"]))["reason"].iloc[0]


def test_non_ok_rows_are_listed_with_reasons(report):
    text = report.read_text().split("## Rows not ok")[1]
    assert "skipped" in text and "tf32 is a CUDA tensor-core mode" in text
    assert "oom" in text and "Tried to allocate 90.00 GiB" in text


def test_merged_csv_holds_every_row(report):
    with open(report.parent / "merged.csv", newline="") as handle:
        assert len(list(csv.DictReader(handle))) == 16


def test_unknown_baseline_is_an_error(tmp_path):
    with pytest.raises(UsageError, match="--baseline 'nope'"):
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
    for path, message in (
        (not_ours, "not a gpubench results file"),
        (truncated, "truncated"),
        (newer, "newer gpubench"),
        (empty, "no result rows"),
    ):
        assert main(["report", str(path), "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err and str(path) in err


def test_older_files_load(tmp_path):
    frame = load_results([DATA])
    assert set(frame["hostname"]) == {"laptop", "h100box"}


def builds(
    median: float, n: int = 3, spread: float = 0.02, seed: int = 0, runs: int = 1
) -> SideUnits:
    return SideUnits(
        list(median * (1 + np.random.default_rng(seed).normal(0, spread, n))), runs, "builds"
    )


def test_a_25_percent_slowdown_is_caught_from_one_run_per_side():
    verdict = judge("case", builds(1.0, seed=1), builds(1.25, seed=2), threshold=0.05)
    assert verdict.verdict == "slower"
    assert 1.15 < verdict.ratio < 1.35 and verdict.ci_low > 1 and verdict.p_value < ALPHA


def test_unchanged_code_is_not_flagged_even_with_between_run_drift():
    """A/A: two runs of the same code whose builds agree within each run, but whose runs differ by
    8% (a shared machine's run-to-run noise): not a regression."""
    for seed in range(20):
        verdict = judge(
            "case",
            builds(1.0, spread=0.01, seed=seed),
            builds(1.08, spread=0.01, seed=seed + 100),
            threshold=0.05,
        )
        assert verdict.verdict != "slower", seed


def test_run_to_run_noise_is_measured_across_cases_and_robust_to_the_changed_ones():
    """Most cases of two runs are unchanged: their scatter is the machine's run-to-run noise. A
    few really slower cases neither inflate it nor escape it. 20 simulated comparisons of 30
    cases whose run medians move ~10% between runs (a noisy day), builds within 2%."""
    false_flags = caught = 0
    for seed in range(20):
        drift = np.random.default_rng(seed).normal(0, 0.10, 30)
        pairs = [
            (
                builds(1.0, seed=i),
                SideUnits([u * np.exp(d) for u in builds(1.0, seed=100 + i).units], 1, "builds"),
            )
            for i, d in enumerate(drift)
        ]
        noise = run_noise(pairs)
        assert 0.05 < noise.scatter < 0.16 and noise.between2 == pytest.approx(
            max(noise.scatter**2, 2 * 0.04**2)
        )
        false_flags += sum(
            judge(str(i), b, n, 0.05, noise.between2, noise.dof).verdict in ("slower", "faster")
            for i, (b, n) in enumerate(pairs)
        )
        changed = [
            (b, SideUnits([u * 1.8 for u in n.units], 1, "builds")) if i < 3 else (b, n)
            for i, (b, n) in enumerate(pairs)
        ]
        robust = run_noise(changed)
        # three changed cases do not inflate the noise
        assert robust.scatter < 1.3 * noise.scatter
        caught += sum(
            judge(str(i), b, n, 0.05, robust.between2, robust.dof).verdict == "slower"
            for i, (b, n) in enumerate(changed[:3])
        )
    # 600 unchanged comparisons at alpha 0.01: about 6 expected
    assert false_flags <= 12
    # of 60 real +80% changes
    assert caught >= 55
    quiet = run_noise(pairs[:5])
    # too few cases: the fixed floor
    assert quiet.scatter is None and quiet.between2 == pytest.approx(2 * 0.04**2)


def test_what_it_cannot_tell_is_inconclusive_with_what_it_could_detect():
    verdict = judge("case", builds(1.0, seed=1), builds(1.02, seed=2), threshold=0.05)
    assert verdict.verdict == "inconclusive" and verdict.detectable > 0.05
    assert (
        "could detect " in verdict.note
        and "% or more here" in verdict.note
        and "runs per side" in verdict.note
    )
    many = judge(
        "case",
        builds(1.0, n=30, seed=1, runs=10),
        builds(1.0, n=30, seed=2, runs=10),
        threshold=0.05,
    )
    assert many.verdict == "no change" and many.detectable < 0.05


def test_a_bimodal_case_is_inconclusive_not_a_regression():
    """One build per mode (CNN inference batch 64 read 7.0 or 12 ms per build): huge spread between
    builds."""
    base = SideUnits([7.0e-3, 12.1e-3, 7.1e-3], 1, "builds")
    new = SideUnits([11.9e-3, 12.4e-3, 7.0e-3], 1, "builds")
    assert judge("cnn-bs64", base, new, 0.05).verdict == "inconclusive"


def test_faster_and_too_few_samples():
    assert judge("c", builds(1.0, seed=1), builds(0.7, seed=2), 0.05).verdict == "faster"
    one = pd.DataFrame([{"median_s": 1.0, "run_id": "r", "samples_s": "[1.0]"}])
    # one build of one sample: nothing to judge the spread with
    assert side_of(one) is None


def test_one_build_per_run_uses_the_windows_of_that_epoch():
    epoch = pd.DataFrame(
        [
            {
                "median_s": 0.07,
                "run_id": "r",
                "samples_s": "[0.07, 0.071, 0.069, 0.072, 0.07, 0.068, 0.07, 0.071, 0.07, 0.069]",
            }
        ]
    )
    side = side_of(epoch)
    assert side is not None and side.kind == "windows" and len(side.units) == 10
    slower = pd.DataFrame(
        [
            dict(
                epoch.iloc[0],
                samples_s=str([s * 1.25 for s in json.loads(epoch["samples_s"].iloc[0])]),
                run_id="q",
            )
        ]
    )
    assert judge("mnist_epoch/guide-template", side, side_of(slower), 0.05).verdict == "slower"


def test_compare_lists_one_sided_cases(tmp_path):
    laptop = load_results([GOLDEN[0]])
    h100 = load_results([GOLDEN[1]])
    verdicts, only_base, only_new, notes = compare_frames(laptop, h100, 0.05)
    cases = [v for v in verdicts if not v.case_id.startswith("(every case")]
    assert len(cases) == 7 and only_base == [] and only_new == []
    assert all(v.verdict in ("faster", "inconclusive") for v in cases)
    # one run per side: the machine-wide line is not judged
    assert [v.verdict for v in verdicts if v not in cases] == ["not judged"]


def write_rows(path, rows):
    writer = ResultsWriter(path.parent, path.stem)
    for row in rows:
        writer.append(
            dict(
                {
                    "schema_version": SCHEMA_VERSION,
                    "run_id": path.stem,
                    "machine_id": "m",
                    "hostname": "h",
                    "device": "cpu",
                    "device_name": "cpu",
                    "workload": "matmul",
                    "build": 0,
                },
                **row,
            )
        )
    writer.close()
    return path


def test_a_case_that_broke_in_new_is_a_regression(tmp_path, capsys):
    ok = [
        {"case_id": "matmul/fp32-n64", "status": "ok", "median_s": m, "build": b, "samples_s": [m]}
        for b, m in enumerate((1.0, 1.01, 0.99))
    ]
    base = write_rows(tmp_path / "base.csv", ok)
    new = write_rows(
        tmp_path / "new.csv",
        [{"case_id": "matmul/fp32-n64", "status": "failed", "reason": "RuntimeError: boom"}],
    )
    assert main(["compare", str(base), str(new)]) == 1
    assert "broken (ok in BASE, RuntimeError: boom)" in capsys.readouterr().out


def test_no_case_in_common_is_an_error_not_a_pass(tmp_path, capsys):
    base = write_rows(
        tmp_path / "base.csv",
        [{"case_id": "matmul/fp32-n64", "status": "ok", "median_s": 1.0, "samples_s": [1.0]}],
    )
    new = write_rows(
        tmp_path / "new.csv",
        [{"case_id": "matmul/fp32-n128", "status": "ok", "median_s": 1.0, "samples_s": [1.0]}],
    )
    assert main(["compare", str(base), str(new)]) == 2
    assert "no case in common" in capsys.readouterr().err


def test_the_same_run_given_twice_counts_once(tmp_path, capsys):
    rows = [
        {"case_id": "matmul/fp32-n64", "status": "ok", "median_s": m, "build": b, "samples_s": [m]}
        for b, m in enumerate((1.0, 1.01, 0.99))
    ]
    base = (
        write_rows(tmp_path / "a" / "base.csv", rows) if (tmp_path / "a").mkdir() is None else None
    )
    (tmp_path / "a" / "copy.csv").write_text(base.read_text())
    new = write_rows(tmp_path / "new.csv", rows)
    assert main(["compare", str(tmp_path / "a"), str(new)]) == 0
    assert "3 duplicate row(s) of run(s) base counted once" in capsys.readouterr().out


def test_compare_exit_code_gates_on_slowdowns(tmp_path, capsys):
    # the H100's figures as if measured on the laptop's device: compare refuses a pair of devices
    fast = tmp_path / "fast.csv"
    fast.write_text(
        GOLDEN[1].read_text().replace(",cuda:0,NVIDIA H100 80GB HBM3,", ",cpu,Intel Core i7,")
    )
    # the laptop is far slower (windows of one build)
    assert main(["compare", str(fast), str(GOLDEN[0])]) == 1
    assert "slower" in capsys.readouterr().out
    assert main(["compare", str(GOLDEN[0]), str(fast), "--threshold", "10%"]) == 0
    assert main(["compare", str(GOLDEN[0]), str(fast), "--threshold", "lots"]) == 2


def test_threshold_parsing():
    assert parse_threshold("5%") == pytest.approx(0.05)
    assert parse_threshold("0.1") == pytest.approx(0.1)


@pytest.mark.parametrize("text", ["5", "1", "0", "-5%", "inf", "nan%", "1e3%", "0.01%"])
def test_an_ambiguous_or_empty_threshold_is_refused(text):
    with pytest.raises(UsageError, match="bad --threshold"):
        parse_threshold(text)


def test_compile_table_derives_the_compiled_step_from_break_even():
    frame = pd.DataFrame(
        [
            {
                "workload": "mnist_epoch",
                "status": "ok",
                "machine": "m",
                "setting": "compile_mode=default",
                "compile_mode": "default",
                "compile_s": 10.0,
                "eager_step_s": 0.004,
                "break_even_steps": 10.0 / 0.001,
            },
            {
                "workload": "mnist_epoch",
                "status": "ok",
                "machine": "m",
                "setting": "compile_mode=max-autotune",
                "compile_mode": "max-autotune",
                "compile_s": 60.0,
                "eager_step_s": 0.004,
                "break_even_steps": float("nan"),
            },
        ]
    )
    table = compile_table(frame)
    assert table["compiled_step_s"][0] == pytest.approx(0.003) and table["gain_pct"][
        0
    ] == pytest.approx(25.0)
    assert table["break_even_steps"].tolist() == ["10000", "never"]


def test_compile_table_holds_one_row_per_machine_and_setting_over_runs():
    def row(run_id: str, compile_s: float, break_even: float) -> dict:
        return {
            "workload": "mnist_epoch",
            "status": "ok",
            "machine": "m",
            "setting": "compile_mode=default",
            "run_id": run_id,
            "compile_mode": "default",
            "compile_s": compile_s,
            "eager_step_s": 0.004,
            "break_even_steps": break_even,
        }

    frame = pd.DataFrame(
        [row("r1", 10.0, 10_000.0), row("r2", 12.0, 12_000.0), row("r3", 11.0, 11_000.0)]
    )
    table = compile_table(frame)
    assert (
        len(table) == 1
        and table["compile_s"][0] == pytest.approx(11.0)
        and table["break_even_steps"][0] == "11000"
    )
    never = compile_table(
        pd.DataFrame(
            [row("r1", 10.0, float("nan")), row("r2", 10.0, float("nan")), row("r3", 10.0, 9.0)]
        )
    )
    # two of three runs never broke even
    assert never["break_even_steps"].tolist() == ["never"]


# reads text and files, not pixels
@pytest.mark.usefixtures("unrendered_plots")
def test_profiler_tables_beside_a_csv_reach_the_report(tmp_path):
    csv_path = shutil.copy(GOLDEN[1], tmp_path / "run.csv")
    ops = [
        {
            "op": "aten::convolution_backward",
            "device_time_us": 2120.0,
            "self_cpu_time_us": 1450.0,
            "cpu_time_us": 4000.0,
            "calls": 20,
        }
    ]
    (tmp_path / "run.ops.json").write_text(json.dumps({"mnist_epoch/guide-template": ops}))
    text = build_report([Path(csv_path)], tmp_path / "out", baseline=None).read_text()
    section = text.split("## Profiler: top operators")[1]
    assert "| aten::convolution_backward | 20 | 2.12 | 1.45 |" in section
    assert "## Profiler" not in build_report(GOLDEN, tmp_path / "plain", baseline=None).read_text()


@pytest.mark.process
def test_reports_read_csv_only_without_torch_or_pytest():
    """Layering: the report builder must run where torch is not installed."""
    code = (
        "import sys, gpubench.reports.render.build, gpubench.reports.render.compare; "
        "bad = {'torch', 'pytest'} & set(sys.modules); sys.exit(str(bad) if bad else 0)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 0, done.stderr + done.stdout


def test_compare_refuses_a_side_that_mixes_machines(capsys):
    assert main(["compare", str(DATA), str(GOLDEN[0])]) == 2
    assert "holds runs from 2 machines" in capsys.readouterr().err


def test_labels_never_merge_two_machines_nor_two_torch_versions():
    frame = pd.DataFrame(
        [
            {
                "hostname": "vm",
                "device_name": "AMD EPYC",
                "device": "cpu",
                "machine_id": "aaaaaaaaaaaa",
                "torch_version": "2.14.1",
            },
            {
                "hostname": "vm",
                "device_name": "AMD EPYC",
                "device": "cpu",
                "machine_id": "bbbbbbbbbbbb",
                "torch_version": "2.14.1",
            },
            {
                "hostname": "box",
                "device_name": "H200",
                "device": "cuda:0",
                "machine_id": "cccccccccccc",
                "torch_version": "2.11.0",
            },
            {
                "hostname": "box",
                "device_name": "H200",
                "device": "cuda:0",
                "machine_id": "cccccccccccc",
                "torch_version": "2.14.1",
            },
        ]
    )
    labels = machine_labels(frame).tolist()
    assert (
        labels[0] != labels[1] and labels[0].endswith("#aaaaaa") and labels[1].endswith("#bbbbbb")
    )
    assert (
        labels[2] == "box · H200 (cuda:0) torch 2.11.0"
        and labels[3] == "box · H200 (cuda:0) torch 2.14.1"
    )


def test_the_summary_comes_first_and_names_every_machine(report):
    head = report.read_text().splitlines()[:40]
    assert "## Summary" in head
    header = next(line for line in head if line.startswith("| figure |"))
    assert (
        "laptop · Intel Core i7 (cpu)" in header
        and "h100box · NVIDIA H100 80GB HBM3 (cuda:0)" in header
    )
    assert any(line.startswith("| speed vs baseline |") for line in head)


# reads text and files, not pixels
@pytest.mark.usefixtures("unrendered_plots")
def test_a_thousand_runs_make_a_report_as_long_as_one_run(tmp_path):
    """Runs of one configuration are aggregated: the report grows with machines and cases, not runs.
    Against two runs: a second run adds the machine's History and its Before and after, once."""
    two, many = tmp_path / "two", tmp_path / "many"
    two.mkdir()
    many.mkdir()
    text = GOLDEN[0].read_text().splitlines()
    # thirty runs of the laptop: the same cases, other run ids
    for run in range(30):
        for folder in (two, many) if run < 2 else (many,):
            (folder / f"r{run}.csv").write_text(
                "\n".join(
                    [text[0]] + [line.replace(",run-laptop,", f",run{run},") for line in text[1:]]
                )
                + "\n"
            )
    short = build_report([two], tmp_path / "o2", baseline=None).read_text().count("\n")
    long = build_report([many], tmp_path / "o30", baseline=None).read_text().count("\n")
    assert long <= 1.1 * short


# reads text and files, not pixels
@pytest.mark.usefixtures("unrendered_plots")
def test_the_report_has_time_to_accuracy_energy_and_per_watt_figures(tmp_path):
    def target_row(design, seed, seconds, status="ok"):
        figures = (
            {
                "time_to_target_s": seconds,
                "epochs_to_target": 1.0,
                "test_accuracy": 0.86,
                "energy_to_target_j": 40.0 * seconds,
                "energy_j": 40.0 * seconds,
                "avg_power_w": 40.0,
                "median_s": seconds,
                "samples_s": [seconds],
            }
            if status == "ok"
            else {"reason": "did not converge: best test accuracy 0.80"}
        )
        return dict(
            {
                "schema_version": SCHEMA_VERSION,
                "workload": "time_to_accuracy",
                "case_id": f"time_to_accuracy/{design}-to0.85",
                "design": design,
                "target_accuracy": 0.85,
                "seed": seed,
                "build": seed,
                "builds": 5,
                "status": status,
                "dataset": "fashion-mnist",
            },
            **figures,
        )

    rows = [target_row("template", s, t) for s, t in enumerate((30.0, 31.0, 29.0, 33.0, 28.0))]
    rows += [target_row("speedrun", s, t) for s, t in enumerate((6.0, 5.0, 7.0, 5.5))] + [
        target_row("speedrun", 4, None, "failed")
    ]
    rows.append(
        {
            "workload": "mnist_epoch",
            "case_id": "mnist_epoch/guide-template",
            "status": "ok",
            "epoch_s": 20.0,
            "median_s": 0.08,
            "test_accuracy": 0.86,
            "dataset": "fashion-mnist",
            "energy_j": 900.0,
            "avg_power_w": 45.0,
            "samples_s": [0.08],
        }
    )
    rows.append(
        {
            "workload": "matmul",
            "case_id": "matmul/bf16-n4096",
            "dtype": "bf16",
            "size": 4096,
            "status": "ok",
            "median_s": 2 * 4096**3 / 2e12,
            "tflops": 2.0,
            "tflop_per_j": 0.05,
            "avg_power_w": 40.0,
            "samples_s": [2 * 4096**3 / 2e12],
        }
    )
    text = build_report(
        [write_rows(tmp_path / "run.csv", rows)], tmp_path / "out", None
    ).read_text()
    section = text.split("## Time to accuracy")[1].split("\n## ")[0]
    # olympic mean of 5, 5.5, 6, 7, inf
    assert "speedrun" in section and "| invalid" not in section and "| 6.17 s |" in section
    summary = text.split("## Summary")[1].split("\n## ")[0]
    # 30 / 6.17
    assert "time to 0.85 accuracy" in summary and "`speedrun`" in summary and "(4.86x)" in summary
    assert summary.index("time to 0.85") < summary.index("energy per template epoch")
    assert (
        "energy per template epoch | 900 J at 45 W" in summary
        and "matmul per watt, best | 0.05 TFLOP/J" in summary
    )


@pytest.mark.usefixtures("unrendered_plots")
def test_a_run_without_an_energy_counter_says_why_once_in_the_summary(tmp_path):
    path = write_rows(
        tmp_path / "novm.csv",
        [
            {
                "case_id": "matmul/fp32-n64",
                "dtype": "fp32",
                "size": 64,
                "status": "ok",
                "median_s": 2 * 64**3 / 1e12,
                "tflops": 1.0,
                "samples_s": [2 * 64**3 / 1e12],
            }
        ],
    )
    (tmp_path / "novm.env.json").write_text(
        json.dumps(
            {
                "energy": {
                    "source": None,
                    "idle_power_w": None,
                    "note": "no RAPL energy counters: "
                    "/sys/class/powercap is absent — CPU energy "
                    "columns stay empty",
                }
            }
        )
    )
    text = build_report([path], tmp_path / "out", None).read_text()
    assert (
        text.count("no RAPL energy counters") == 1
        and ("| energy | not measured: no RAPL energy counters: /sys/class/powercap is absent |")
        in text
    )


def _frame(
    run_id: str, medians: dict[str, list[float]], windows: dict[str, list[float]] | None = None
):
    """A run's rows: case -> build medians (several builds), and case -> one build's windows."""
    rows = [
        {
            "case_id": case,
            "status": "ok",
            "median_s": m,
            "run_id": run_id,
            "build": b,
            "samples_s": json.dumps([m]),
            "reason": "",
        }
        for case, ms in medians.items()
        for b, m in enumerate(ms)
    ]
    rows += [
        {
            "case_id": case,
            "status": "ok",
            "median_s": float(np.median(w)),
            "run_id": run_id,
            "build": 0,
            "samples_s": json.dumps(w),
            "reason": "",
        }
        for case, w in (windows or {}).items()
    ]
    return pd.DataFrame(rows)


def _quiet_cases(seed: int, factor: float = 1.0, n: int = 20) -> dict[str, list[float]]:
    rng = np.random.default_rng(seed)
    return {
        f"matmul/case{i}": list(factor * (1 + i / 10) * (1 + rng.normal(0, 0.02, 3)))
        for i in range(n)
    }


def test_a_workload_that_swings_case_by_case_between_runs_is_judged_against_its_own_scatter():
    """Two runs of unchanged code: most cases moved ~3%, but the six training-step cases of one
    workload moved -34% to +56% case by case (measured here on memory_strategies). Not a
    regression; and a quiet workload's one really slower case is still caught."""
    swings = [0.66, 1.56, 1.35, 0.83, 1.08, 0.95]
    base = _frame(
        "a", {**_quiet_cases(1), **{f"memory_strategies/s{i}": [0.1, 0.101] for i in range(6)}}
    )
    new = _frame(
        "b",
        {
            **_quiet_cases(2, 1.03),
            **{f"memory_strategies/s{i}": [0.1 * s, 0.101 * s] for i, s in enumerate(swings)},
        },
    )
    verdicts = {v.case_id: v.verdict for v in compare_frames(base, new, 0.05)[0]}
    assert not [c for c, v in verdicts.items() if v in ("slower", "faster")], verdicts
    changed = _quiet_cases(2, 1.03)
    changed["matmul/case3"] = [m * 1.4 for m in changed["matmul/case3"]]
    new = _frame("b", {**changed, **{f"memory_strategies/s{i}": [0.1, 0.101] for i in range(6)}})
    verdicts = {v.case_id: v.verdict for v in compare_frames(base, new, 0.05)[0]}
    assert verdicts["matmul/case3"] == "slower"


def test_a_case_built_once_per_run_also_carries_the_noise_between_processes():
    """A one-build case is judged on its rounds, all from one process: a 19% move (selfcheck
    n=256 between two unchanged runs) is not a regression when builds of other cases differ by
    ~10% between processes; an 80% move still is."""
    rng = np.random.default_rng(5)
    spread = {
        f"matmul/case{i}": list((1 + i / 10) * (1 + rng.normal(0, 0.10, 3))) for i in range(20)
    }
    rounds = [1.0 + 0.01 * k for k in range(-3, 4)]
    base = _frame("a", spread, {"selfcheck/n256": rounds})
    moved = {k: [m * 1.0 for m in v] for k, v in spread.items()}
    small = compare_frames(
        base, _frame("b", moved, {"selfcheck/n256": [r * 1.19 for r in rounds]}), 0.05
    )[0]
    large = compare_frames(
        base, _frame("b", moved, {"selfcheck/n256": [r * 1.8 for r in rounds]}), 0.05
    )[0]
    assert next(v for v in small if v.case_id == "selfcheck/n256").verdict == "inconclusive"
    assert next(v for v in large if v.case_id == "selfcheck/n256").verdict == "slower"


# ---- damaged or odd inputs --------------------------------------------------------------------


def test_a_file_cut_inside_its_last_quoted_field_is_refused(tmp_path):
    path = write_rows(
        tmp_path / "damaged.csv",
        [
            {
                "case_id": "matmul/fp32-n64",
                "status": "ok",
                "median_s": 0.001,
                "samples_s": [0.001, 0.002, 0.003],
            }
        ],
    )
    text = path.read_text()
    # inside the quotes, no newline at the end
    path.write_text(text[: text.rindex("0.002")])
    with pytest.raises(UsageError, match="line 2 is truncated"):
        load_results([path])


def test_things_named_csv_that_are_not_files_are_skipped(tmp_path):
    good = write_rows(
        tmp_path / "good.csv",
        [
            {
                "case_id": "matmul/fp32-n64",
                "status": "ok",
                "median_s": 0.001,
                "samples_s": [0.001, 0.001],
            }
        ],
    )
    (tmp_path / "folder.csv").mkdir()
    (tmp_path / "dangling.csv").symlink_to(tmp_path / "nowhere")
    # reading it would hang the report
    os.mkfifo(tmp_path / "pipe.csv")
    assert result_files([tmp_path]) == [good]


# reads text and files, not pixels
@pytest.mark.usefixtures("unrendered_plots")
def test_a_run_given_twice_counts_once_everywhere_and_the_report_says_so(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    shutil.copy(GOLDEN[1], folder / "h100.csv")
    rows = len(load_results([GOLDEN[1]]))
    report = build_report([folder, folder / "h100.csv"], tmp_path / "out", None).read_text(
        encoding="utf-8"
    )
    with open(tmp_path / "out" / "merged.csv", newline="", encoding="utf-8") as handle:
        assert len(list(csv.DictReader(handle))) == rows
    assert (
        f"{rows} rows from 1 run(s)" in report
        and f"{rows} duplicate row(s) of run(s)" in report
        and "counted once" in report
    )


# reads text and files, not pixels
@pytest.mark.usefixtures("unrendered_plots")
def test_two_machines_sharing_a_run_id_are_two_runs_not_duplicates(tmp_path, capsys):
    """`--run-id nightly` on two nodes of one store: same run id and case ids, different machines.
    They are two runs side by side, never one run holding each case twice (refused) or counted once
    (a machine lost)."""
    first = tmp_path / "store" / "h100box-1" / "nightly.csv"
    second = tmp_path / "store" / "h100box2-2" / "nightly.csv"
    for path in (first, second):
        path.parent.mkdir(parents=True)
    first.write_text(GOLDEN[1].read_text().replace("run-h100box", "nightly"))
    slower = pd.read_csv(first)
    # the other node's own figures: the same cases, other numbers, each rate agreeing with its
    # median
    slower["median_s"] *= 1.5
    for rate in ("tflops", "gbps", "samples_per_s"):
        slower[rate] /= 1.5
    slower["machine_id"], slower["hostname"] = "cccccccccccc", "h100box2"
    slower.to_csv(second, index=False)
    report = build_report([tmp_path / "store"], tmp_path / "out", None).read_text(encoding="utf-8")
    merged = pd.read_csv(tmp_path / "out" / "merged.csv")
    assert len(merged) == 2 * len(slower) and set(merged["hostname"]) == {"h100box", "h100box2"}
    assert "duplicate row" not in report and "h100box2" in report
    main(["compare", str(first), str(second)])
    out = capsys.readouterr().out
    assert "the sides differ in machines" in out and "same run(s)" not in out


@pytest.mark.usefixtures("unrendered_plots")
def test_one_run_in_two_files_with_different_figures_is_read_as_two_runs_naming_both_files(
    tmp_path, capsys
):
    """Neither file is named after the run (`<run_id>.csv`): neither is its writer, both are kept
    apart."""
    shutil.copy(GOLDEN[1], tmp_path / "a.csv")
    other = pd.read_csv(GOLDEN[1])
    other.loc[0, "median_s"] *= 2
    other.to_csv(tmp_path / "b.csv", index=False)
    build_report([tmp_path], tmp_path / "out", None)
    err = capsys.readouterr().err
    assert "run run-h100box is in 2 files with other rows" in err
    assert (
        f"run-h100box@1 ({tmp_path / 'a.csv'}" in err
        and f"run-h100box@2 ({tmp_path / 'b.csv'}" in err
    )


def test_a_case_a_run_budget_skipped_is_broken():
    """Ok in BASE, skipped in NEW because it no longer fits its share of the run budget: too slow
    now to be measured, the worst slowdown, so broken ("untried in NEW"), not "only in BASE" with
    exit 0; skipped for another reason it is broken too."""
    base = _frame("a", {"matmul/x": [1.0, 1.01, 0.99], "matmul/y": [1.0, 1.01, 0.99]})
    over = (
        "over budget: one call takes 2.0 s; its share of the 3m budget is 0.3 s — raise --budget "
        "or deselect it"
    )
    new = pd.concat(
        [
            _frame("b", {}),
            pd.DataFrame(
                [
                    {
                        "case_id": "matmul/x",
                        "status": "skipped",
                        "median_s": float("nan"),
                        "run_id": "b",
                        "build": 0,
                        "samples_s": "",
                        "reason": over,
                        "flags": "over-budget",
                    },
                    {
                        "case_id": "matmul/y",
                        "status": "skipped",
                        "median_s": float("nan"),
                        "run_id": "b",
                        "build": 0,
                        "samples_s": "",
                        "reason": "tf32 is a CUDA tensor-core mode",
                    },
                ]
            ),
        ]
    )
    verdicts, only_base, _, _ = compare_frames(base, new, 0.05)
    assert {v.case_id: (v.verdict, v.note) for v in verdicts} == {
        "matmul/x": ("broken", f"untried in NEW: {over}"),
        "matmul/y": ("broken", "ok in BASE, tf32 is a CUDA tensor-core mode"),
    }
    assert only_base == []


def test_a_run_to_target_stopped_short_by_its_epoch_cap_or_its_budget_is_broken():
    """Ok in BASE; in NEW time to accuracy stopped short of its target: by the profile's epoch cap
    it no longer converges, by its share of a run budget it no longer reaches the target in the time
    BASE did: broken either way."""
    base = _frame(
        "a", {"time_to_accuracy/x": [1.0, 1.01, 0.99], "time_to_accuracy/y": [1.0, 1.01, 0.99]}
    )
    unreached = {
        "status": "unreached",
        "median_s": float("nan"),
        "run_id": "b",
        "build": 0,
        "samples_s": "",
    }
    new = pd.concat(
        [
            _frame("b", {}),
            pd.DataFrame(
                [
                    {
                        **unreached,
                        "case_id": "time_to_accuracy/x",
                        "stopped_by": "budget",
                        "reason": "stopped by its budget share after 30 s at 80.1% (target 85%) — "
                        "raise --budget to reach it",
                    },
                    {
                        **unreached,
                        "case_id": "time_to_accuracy/y",
                        "stopped_by": "cap",
                        "reason": "stopped by its 3-epoch cap at 84.0% (target 85%)",
                    },
                ]
            ),
        ]
    )
    verdicts, only_base, _, notes = compare_frames(base, new, 0.05)
    assert [(v.case_id, v.verdict) for v in verdicts] == [
        ("time_to_accuracy/x", "broken"),
        ("time_to_accuracy/y", "broken"),
    ]
    assert (
        verdicts[0].note.startswith("unreached in NEW: stopped by its budget share")
        and only_base == []
    )
    # an unreached BASE row is no figure to compare against
    _, _, _, notes = compare_frames(new, base, 0.05)
    assert "BASE time_to_accuracy/x excluded: stopped by its budget share after 30 s" in " ".join(
        notes
    )


def busy_rows(
    factor: float,
    flags: str,
    cases: tuple[str, ...] = ("matmul/fp32-n64", "matmul/fp32-n128"),
    changed: str = "matmul/fp32-n128",
) -> list[dict]:
    """Three builds of each case, the changed case's times scaled by factor; every row carries the
    flags."""
    return [
        {
            "case_id": case,
            "status": "ok",
            "median_s": m * (factor if case == changed else 1.0),
            "build": b,
            "samples_s": [m * (factor if case == changed else 1.0)],
            "flags": flags,
        }
        for case in cases
        for b, m in enumerate((1.0, 1.01, 0.99))
    ]


# base flags, new flags, new/base of one case, exit, that case's verdict
BUSY_DIRECTIONS = [
    # quiet: the gate as it always was
    ("", "", 2.0, 1, "slower"),
    (
        "busy",
        "",
        2.0,
        1,
        "slower (judged: BASE rows flagged busy, so the slowdown is if anything understated",
    ),
    ("", "busy", 2.0, 6, "cannot judge: busy (NEW rows flagged busy: the load alone reads slower"),
    ("", "noisy;busy-gpu", 2.0, 6, "cannot judge: busy (NEW rows flagged busy-gpu"),
    # noisy is no busy
    ("", "noisy", 2.0, 1, "slower"),
    ("busy", "busy", 2.0, 6, "cannot judge: busy (NEW rows flagged busy"),
    (
        "",
        "busy",
        0.5,
        0,
        "faster (judged: NEW rows flagged busy, so the speedup is if anything understated",
    ),
    (
        "busy",
        "",
        0.5,
        6,
        "cannot judge: busy (BASE rows flagged busy: the load alone makes NEW read faster",
    ),
    ("busy", "busy", 0.5, 6, "cannot judge: busy (BASE rows flagged busy"),
]


@pytest.mark.parametrize("base_flags, new_flags, factor, code, verdict", BUSY_DIRECTIONS)
def test_busy_rows_widen_the_noise_and_the_direction_decides(
    tmp_path, capsys, base_flags, new_flags, factor, code, verdict
):
    """Another process makes a case read slower, never faster: a slowdown against a busy BASE (which
    read 'inconclusive (set aside …)', exit 0, while busy rows were set aside) or a speedup against
    a busy NEW is understated, so judged; the directions the load alone could make are 'cannot
    judge: busy', exit 6: never a clean pass."""
    base = write_rows(tmp_path / "base.csv", busy_rows(1.0, base_flags))
    new = write_rows(tmp_path / "new.csv", busy_rows(factor, new_flags))
    assert main(["compare", str(base), str(new)]) == code
    out = capsys.readouterr().out
    n128 = next(line for line in out.splitlines() if line.startswith("| matmul/fp32-n128 "))
    assert f"| {verdict}" in n128, n128
    assert ("cannot be judged" in out) == (code == 6) and "set aside" not in out


@pytest.mark.parametrize(
    "base_flags, new_flags, base_factor, code",
    [
        ("", "", 1.0, 0),
        ("busy", "", 1.0, 0),
        ("", "busy", 1.0, 0),
        ("busy", "busy", 1.0, 0),
        # the load slowed BASE: NEW reads faster, which the load alone explains
        ("busy", "", 1.6, 6),
        # both sides busy: each side's noise widened, 1.6x is within it
        ("busy", "busy", 1.6, 0),
        # beyond it, but either side's load alone could have made it
        ("busy", "busy", 3.0, 6),
    ],
)
def test_unchanged_code_with_busy_rows_is_never_called_slower_or_faster(
    tmp_path, capsys, base_flags, new_flags, base_factor, code
):
    base = write_rows(tmp_path / "base.csv", busy_rows(base_factor, base_flags))
    new = write_rows(tmp_path / "new.csv", busy_rows(1.0, new_flags))
    assert main(["compare", str(base), str(new)]) == code
    verdicts = [
        line.split("|")[-2]
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("| matmul/")
    ]
    assert len(verdicts) == 2 and not [
        v for v in verdicts if v.strip().startswith(("slower", "faster"))
    ], verdicts


def test_a_slower_case_fails_the_gate_even_beside_one_busy_rows_cannot_judge(tmp_path, capsys):
    base = write_rows(tmp_path / "base.csv", busy_rows(1.0, ""))
    quiet_slower = [
        r
        for r in busy_rows(2.0, "", changed="matmul/fp32-n64")
        if r["case_id"] == "matmul/fp32-n64"
    ]
    busy_slower = [r for r in busy_rows(2.0, "busy") if r["case_id"] == "matmul/fp32-n128"]
    assert (
        main(
            [
                "compare",
                str(base),
                str(write_rows(tmp_path / "new.csv", quiet_slower + busy_slower)),
            ]
        )
        == 1
    )
    out = capsys.readouterr().out
    assert "1 slower" in out and "1 cannot judge: busy" in out


def test_a_users_own_case_twice_as_slow_against_a_busy_base_fails_the_gate(tmp_path, capsys):
    """A user's case measured in one build per run (its rounds are its units) carries the most noise
    of all; twice as slow against a base whose rows are flagged busy is still a regression."""
    rng = np.random.default_rng(3)

    def one_build(factor: float, flags: str) -> list[dict]:
        rounds = list(factor * 1e-3 * (1 + rng.normal(0, 0.02, 10)))
        return [
            {
                "case_id": "mine/step",
                "workload": "mine",
                "status": "ok",
                "median_s": float(np.median(rounds)),
                "samples_s": rounds,
                "flags": flags,
            }
        ]

    base, new = (
        write_rows(tmp_path / "base.csv", one_build(1.0, "busy")),
        write_rows(tmp_path / "new.csv", one_build(2.0, "")),
    )
    assert main(["compare", str(base), str(new)]) == 1
    assert "| slower (" in capsys.readouterr().out


# ---- plain text where nothing needs escaping --------------------------------------------------


def test_compare_prints_its_notes_as_written(tmp_path, capsys):
    """Compare's table is markdown, escaped where a character would change it, never elsewhere: the
    terminal showed `\\~25 runs per side`."""
    rng = np.random.default_rng(7)

    # one build per side: judged on its windows
    def one_build(factor: float) -> list[dict]:
        windows = list(factor * 1e-3 * (1 + rng.normal(0, 0.05, 10)))
        return [
            {
                "case_id": "matmul/fp32-n64",
                "status": "ok",
                "median_s": float(np.median(windows)),
                "samples_s": windows,
            }
        ]

    base, new = (
        write_rows(tmp_path / "base.csv", one_build(1.0)),
        write_rows(tmp_path / "new.csv", one_build(1.05)),
    )
    assert main(["compare", str(base), str(new)]) == 0
    row = next(
        line
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("| matmul/fp32-n64 ")
    )
    assert re.search(r"; ~\d+ runs per side would resolve 5%", row) and "\\" not in row, row


@pytest.mark.parametrize(
    "label, cell",
    [
        # an --input-ids shape: no tag starts with a digit
        ("64 ids<1024", "64 ids<1024"),
        ("3.03 > 1.05 — a < b", "3.03 > 1.05 — a < b"),
        # a strikethrough cannot close after a space
        ("over ~60 runs; C:\\runs\\a", "over ~60 runs; C:\\runs\\a"),
        ("<img src=x onerror=alert(1)>", "&lt;img src=x onerror=alert(1)>"),
        # an e-mail autolink
        ("<1@e.io>", "&lt;1@e.io>"),
        ("> quoted", "\\> quoted"),
        ("a~~s~~ &amp; *b*", "a\\~\\~s\\~\\~ &amp;amp; \\*b\\*"),
    ],
)
def test_table_cells_escape_only_what_would_change_the_markdown(label, cell):
    from gpubench.reports.render.markdown import md_table

    assert md_table(pd.DataFrame({"input_shape": [label]})).splitlines()[-1] == f"| {cell} |"
