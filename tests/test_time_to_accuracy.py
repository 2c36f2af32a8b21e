"""Time to accuracy: the MLPerf-style clock, seeds, the schedule, unreached rows, scoring."""

import itertools
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import torch
from fakes import FakeBenchmark, RunContext, run_with

from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.devices.data_source import DataSource
from gpubench.harness.devices.datasets import CLASSES, Split
from gpubench.harness.budget.shares import CaseShare
from gpubench.harness.records.results import ResultsWriter
from gpubench.harness.records.results_reader import read_rows
from gpubench.harness.records.schema import SCHEMA_VERSION
from gpubench.harness.measurement.timing import SyncedClock
from gpubench.harness.workloads.common import epoch_race
from gpubench.harness.workloads import time_to_accuracy as tta
from gpubench.harness.workloads.common.models import make_model
from gpubench.reports.judge.tables import first_to_target, olympic_mean, time_to_accuracy_table

CPU = torch.device("cpu")
ROOT = Path(__file__).resolve().parent.parent


def banded_split(size: int, seed: int, learnable: bool = True) -> Split:
    """Class k lights row band k of the image: a CNN learns it in a few dozen steps. Not
    learnable: the labels are shuffled, so no model gets past chance."""
    gen = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, CLASSES, (size,), generator=gen)
    images = torch.randint(0, 40, (size, 28, 28), dtype=torch.uint8, generator=gen)
    for k in range(CLASSES):
        images[labels == k, 2 * k + 3 : 2 * k + 6, :] = 250
    if not learnable:
        labels = labels[torch.randperm(size, generator=gen)]
    return Split(images, labels)


# The training tests check the clock, the evaluation points, the cap and the row, not the CNN: the
# workload's MLP (a TargetCase's `model`) on a few hundred banded images reaches the targets in a
# few steps.
TRAIN_IMAGES, TEST_IMAGES = 1024, 128


@pytest.fixture
def easy_data(monkeypatch, tmp_path):
    monkeypatch.setattr(
        "gpubench.harness.devices.data_source.load_split",
        lambda dataset, root, train: banded_split(
            TRAIN_IMAGES if train else TEST_IMAGES, int(train)
        ),
    )
    return DataSource("fashion-mnist", tmp_path, _resolved="fashion-mnist")


def unlearnable(monkeypatch, tmp_path, train_images: int) -> DataSource:
    """Data no model can learn, `train_images` of them to train on."""
    monkeypatch.setattr(
        "gpubench.harness.devices.data_source.load_split",
        lambda dataset, root, train: banded_split(
            train_images if train else TEST_IMAGES, int(train), learnable=False
        ),
    )
    return DataSource("fashion-mnist", tmp_path, _resolved="fashion-mnist")


@pytest.fixture
def hard_data(monkeypatch, tmp_path):
    return unlearnable(monkeypatch, tmp_path, 256)


def case(**changes) -> tta.TargetCase:
    base = tta.TargetCase(
        **tta.epoch_fields(tta.designs(gpu=False)["fastest-epoch"]),
        design="fastest-epoch",
        target_accuracy=0.9,
    )
    return replace(
        base, precision="fp32", batch_size=64, **{"raced": False, "model": "mlp", **changes}
    )


@pytest.fixture
def slow_data(monkeypatch, tmp_path):
    """Unlearnable, and 16 steps an epoch at batch 64: evaluations every 4th step, so a stop can
    fall between them."""
    return unlearnable(monkeypatch, tmp_path, 1024)


def share_of_steps(steps: int) -> CaseShare:
    """A budget share that runs out at the given training step: its clock ticks a second each time
    it is read, and training reads it once a step."""
    ticks = itertools.count()
    return CaseShare(share_s=float(steps), budget_s=300.0, now=lambda: float(next(ticks)))


def run_row(tmp_path, data, target_case, profile="quick", build_index=0, share=None):
    (tmp_path / "results").mkdir(exist_ok=True)
    writer = ResultsWriter(tmp_path / "results", "run")
    bctx = BuildContext(CPU, profile, SyncedClock(CPU), data_source=lambda: data, share=share)
    try:
        return run_with(
            target_case,
            tta,
            FakeBenchmark(),
            RunContext(
                bctx,
                {"schema_version": SCHEMA_VERSION, "run_id": "run", "device_name": "cpu"},
                writer,
            ),
            build_index,
        )
    finally:
        writer.close()


def test_the_one_cycle_schedule_warms_up_peaks_and_decays():
    horizon = 100
    factors = [tta.lr_factor(step, horizon) for step in range(150)]
    assert (
        factors[0] == pytest.approx(0.04)
        and max(factors) == pytest.approx(1.0)
        and factors.index(max(factors)) == 25
    )
    assert factors[99] < 0.06 and all(f == pytest.approx(0.04) for f in factors[100:])
    assert all(a <= b for a, b in zip(factors[:25], factors[1:26])) and all(
        a >= b for a, b in zip(factors[25:99], factors[26:100])
    )


def test_a_reachable_target_gives_time_epochs_accuracy_and_seed(tmp_path, easy_data):
    row = run_row(tmp_path, easy_data, case(), build_index=2)
    assert row["status"] == "ok", row["reason"]
    assert row["test_accuracy"] >= 0.9 and row["seed"] == 2 and row["target_accuracy"] == 0.9
    assert row["time_to_target_s"] > 0 and row["samples_s"] == [row["time_to_target_s"]]
    steps_per_epoch = math.ceil(TRAIN_IMAGES / 64)
    # evaluated every quarter epoch and at each epoch's end
    every = math.ceil(steps_per_epoch / tta.EVALS_PER_EPOCH)
    in_epoch = round(row["epochs_to_target"] * steps_per_epoch) % steps_per_epoch
    # the run stopped at an evaluation point
    assert in_epoch % every == 0
    # a target the user chose is in the id
    assert row["case_id"] == "time_to_accuracy/fastest-epoch-to0.9"


def test_a_target_not_reached_within_the_cap_is_an_unreached_row_with_what_it_measured(
    tmp_path, hard_data
):
    row = run_row(tmp_path, hard_data, case(target_accuracy=0.99), profile="smoke")
    # the report counts it as that seed's
    assert row["status"] == "unreached" and row["target_accuracy"] == 0.99 and row["seed"] == 0
    cap = tta.EPOCH_CAP["smoke"]
    assert row["stopped_by"] == "cap" and row["epochs_trained"] == pytest.approx(cap)
    assert 0 <= row["test_accuracy"] < 0.99 and row["training_s"] > 0
    # never a time to target
    assert row.get("time_to_target_s") is None and row.get("epochs_to_target") is None
    assert (
        row["reason"].startswith(f"stopped by its {cap}-epoch cap after ")
        and "(target 99%)" in row["reason"]
    )


def test_a_run_its_budget_share_stops_is_an_unreached_row_never_a_skip(tmp_path, slow_data):
    """Training that runs out of its share of --budget before the target keeps what it measured: the
    accuracy where it stopped and the time it spent, in a row of its own that the results file reads
    back."""
    row = run_row(tmp_path, slow_data, case(target_accuracy=0.99), share=share_of_steps(6))
    assert row["status"] == "unreached", row["reason"]
    # between evaluations
    assert row["stopped_by"] == "budget" and row["epochs_trained"] == pytest.approx(6 / 16)
    assert (
        0 <= row["test_accuracy"] < 0.99
        and row["training_s"] > 0
        and row["first_call_s"] == row["training_s"]
    )
    assert (
        row.get("time_to_target_s") is None
        and row.get("epochs_to_target") is None
        and not row.get("median_s")
    )
    accuracy = f"{100 * row['test_accuracy']:.3g}%"
    assert (
        row["reason"].startswith("stopped by its budget share after ")
        and f" at {accuracy} (target 99%)" in row["reason"]
    )
    (written,) = read_rows(tmp_path / "results" / "run.csv")
    assert written["status"] == "unreached" and written["training_s"] == row["training_s"]


def test_a_run_that_reaches_its_target_within_its_share_is_unchanged(tmp_path, easy_data):
    row = run_row(tmp_path, easy_data, case(), share=CaseShare(share_s=1e6, budget_s=1e6))
    assert row["status"] == "ok" and row["time_to_target_s"] > 0 and row["test_accuracy"] >= 0.9
    assert row["samples_s"] == [row["time_to_target_s"]] and row["epochs_to_target"] > 0
    assert (
        row.get("training_s") is None
        and row.get("epochs_trained") is None
        and row.get("stopped_by") is None
    )


def test_warm_up_leaves_the_timed_model_at_its_seeds_initial_weights(easy_data):
    ctx = BuildContext(CPU, "quick", SyncedClock(CPU), data_source=lambda: easy_data, build_index=1)
    timed = tta.set_up(case(model="cnn"), ctx)
    # the trainer is inside the timed function: find it by its model
    trainer = timed.fn.__closure__
    model = next(
        cell.cell_contents for cell in trainer if isinstance(cell.cell_contents, tta.Trainer)
    ).model
    fresh = make_model("cnn", seed=tta.SEED_BASE + 1)
    assert all(
        torch.equal(a, b) for a, b in zip(model.state_dict().values(), fresh.state_dict().values())
    )
    trainer = next(
        cell.cell_contents
        for cell in timed.fn.__closure__
        if isinstance(cell.cell_contents, tta.Trainer)
    )
    # Adam's moments from warm-up are gone too
    assert not trainer.optimizer.state and trainer.seen == 0
    other = make_model("cnn", seed=tta.SEED_BASE)
    assert not all(
        torch.equal(a, b) for a, b in zip(model.state_dict().values(), other.state_dict().values())
    )


def test_synthetic_data_has_no_target_to_reach(tmp_path):
    row = run_row(tmp_path, DataSource("synthetic", tmp_path), case())
    assert row["status"] == "skipped" and "no accuracy to reach" in row["reason"]


def test_cases_follow_the_dataset_default_and_the_users_target(tmp_path, easy_data):
    never = lambda: pytest.fail("collection must not look up the dataset")  # noqa: E731 - every build process collects
    quick = tta.cases(BuildContext(CPU, "quick", SyncedClock(CPU), data_source=never))
    assert [c.case_id for c in quick] == ["time_to_accuracy/template", "time_to_accuracy/speedrun"]
    assert (
        quick[0].loader == "dataloader"
        and quick[1].schedule == "onecycle"
        and quick[1].loader == "preloaded"
    )
    assert (
        tta.target_for(quick[0], "fashion-mnist", "quick") == 0.85
        and tta.target_for(quick[0], "mnist", "full") == 0.98
    )
    assert tta.target_for(quick[0], "fashion-mnist", "smoke") == tta.SMOKE_TARGET
    full = tta.cases(
        BuildContext(CPU, "full", SyncedClock(CPU), data_source=never, target_accuracy=0.9)
    )
    assert [c.case_id for c in full] == [
        "time_to_accuracy/template-to0.9",
        "time_to_accuracy/fastest-epoch-to0.9",
        "time_to_accuracy/speedrun-to0.9",
    ]
    # five seeds per design in the full profile
    assert tta.WORKLOAD.builds("full") >= 5
    speedrun = replace(
        quick[1],
        precision="fp32",
        batch_size=64,
        schedule="constant",
        lr=1e-3,
        model="mlp",
        raced=False,
    )
    row = run_row(tmp_path, easy_data, speedrun, profile="smoke")
    # the row holds the default it used
    assert row["status"] == "ok" and row["target_accuracy"] == tta.SMOKE_TARGET


def test_olympic_mean_drops_the_fastest_and_slowest_and_counts_non_convergence_as_slowest():
    assert olympic_mean([1.0, 2.0, 3.0, 4.0, 100.0]) == pytest.approx(3.0)
    assert olympic_mean([1.0, 2.0, 3.0, 4.0, math.inf]) == pytest.approx(3.0)
    assert math.isinf(olympic_mean([1.0, 2.0, 3.0, math.inf, math.inf]))
    assert olympic_mean([2.0, 4.0]) == pytest.approx(3.0)


def _rows(machine, design, times, failed=0):
    ok = [
        {
            "machine": machine,
            "workload": "time_to_accuracy",
            "design": design,
            "target_accuracy": 0.85,
            "status": "ok",
            "time_to_target_s": t,
            "epochs_to_target": 1.0,
            "test_accuracy": 0.86,
            "energy_to_target_j": 10 * t,
            "compile_s": None,
        }
        for t in times
    ]
    bad = [
        {
            "machine": machine,
            "workload": "time_to_accuracy",
            "design": design,
            "target_accuracy": 0.85,
            "status": "failed",
            "time_to_target_s": None,
            "epochs_to_target": None,
            "test_accuracy": None,
            "energy_to_target_j": None,
            "compile_s": None,
        }
    ] * failed
    return ok + bad


def test_the_report_names_the_first_design_to_target_and_invalidates_two_non_converged_seeds():
    frame = pd.DataFrame(
        _rows("m", "template", [30, 31, 29, 32, 28])
        + _rows("m", "speedrun", [3, 4, 5, 6], failed=1)
        + _rows("m", "fastest-epoch", [1, 1, 1], failed=2)
    )
    table = time_to_accuracy_table(frame)
    by = table.set_index("design")
    assert by.loc["template", "olympic_mean_s"] == pytest.approx(30.0) and by.loc[
        "speedrun", "olympic_mean_s"
    ] == pytest.approx(5.0)
    assert math.isnan(by.loc["fastest-epoch", "olympic_mean_s"]) and by.loc[
        "fastest-epoch", "verdict"
    ].startswith("invalid: 2 of 5")
    first = first_to_target(frame).iloc[0]
    assert first["first_design"] == "speedrun" and first["template_over_first"] == pytest.approx(
        6.0
    )


@pytest.mark.process
def test_a_target_outside_zero_one_is_one_line_before_any_case(tmp_path):
    for bad in ("1.5", "0", "nan"):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                str(ROOT / "benches" / "bench_time_to_accuracy.py"),
                "--benchmark-only",
                "-p",
                "no:cacheprovider",
                f"--target-accuracy={bad}",
                f"--results-dir={tmp_path / 'r'}",
                "--dataset=synthetic",
            ],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=120,
        )
        assert proc.returncode == 4, proc.stdout + proc.stderr
        errors = [line for line in proc.stderr.splitlines() if line.strip()]
        assert (
            len(errors) == 1 and "--target-accuracy" in errors[0] and "outside (0, 1)" in errors[0]
        )
        assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


def test_the_template_design_trains_through_a_dataloader_started_inside_the_clock(
    tmp_path, easy_data
):
    template = replace(
        tta.TargetCase(**tta.epoch_fields(tta.designs(gpu=False)["template"]), target_accuracy=0.9),
        num_workers=0,
        batch_size=64,
        model="mlp",
    )
    row = run_row(tmp_path, easy_data, template)
    assert row["status"] == "ok" and row["loader"] == "dataloader" and row["test_accuracy"] >= 0.9


def test_a_seed_that_crashed_before_its_target_was_known_still_counts_against_its_design():
    frame = pd.DataFrame(
        _rows("m", "template", [30, 31, 29])
        + [dict(_rows("m", "template", [], failed=1)[0], target_accuracy=None)] * 2
    )
    row = time_to_accuracy_table(frame).iloc[0]
    assert row["seeds"] == 5 and row["not_converged"] == 2 and row["verdict"].startswith("invalid")


def test_unreached_seeds_count_without_a_time_and_show_what_they_reached():
    """A seed the budget stopped has no time to target: it counts as the slowest, the verdict names
    the budget, and its accuracy and time spent are shown apart. A seed its epoch cap stopped did
    not converge, as before."""
    stopped = [
        dict(
            _rows("m", "template", [], failed=1)[0],
            status="unreached",
            test_accuracy=0.832,
            training_s=156.0,
            stopped_by="budget",
        )
    ]
    row = time_to_accuracy_table(pd.DataFrame(_rows("m", "template", [30.0]) + stopped)).iloc[0]
    assert row["seeds"] == 2 and row["stopped_by_budget"] == 1 and row["not_converged"] == 0
    assert row["unreached"] == "83.2% in 2m36s (budget)" and row["fastest_seed_s"] == 30.0
    alone = time_to_accuracy_table(pd.DataFrame(stopped * 2)).iloc[0]
    assert math.isnan(alone["olympic_mean_s"]) and "stopped by the run budget" in alone["verdict"]
    capped = [dict(stopped[0], stopped_by="cap")] * 2
    table = time_to_accuracy_table(
        pd.DataFrame(_rows("m", "template", [30.0, 31.0, 29.0]) + capped)
    ).iloc[0]
    assert (
        table["not_converged"] == 2 and table["verdict"] == "invalid: 2 of 5 seeds did not converge"
    )


def test_the_report_shows_an_unreached_seed_with_what_it_reached_and_no_time(tmp_path):
    from gpubench.reports.render.build import build_report

    writer = ResultsWriter(tmp_path, "run")
    base = {
        "schema_version": SCHEMA_VERSION,
        "run_id": "run",
        "machine_id": "m",
        "hostname": "h",
        "device": "cpu",
        "device_name": "cpu",
        "build": 0,
        "builds": 1,
    }
    writer.append(
        dict(
            base,
            workload="time_to_accuracy",
            case_id="time_to_accuracy/template",
            design="template",
            target_accuracy=0.85,
            seed=0,
            dataset="fashion-mnist",
            status="unreached",
            test_accuracy=0.832,
            training_s=156.0,
            epochs_trained=1.4,
            stopped_by="budget",
            first_call_s=156.0,
            reason="stopped by its budget share after 2m36s at 83.2% (target 85%) — raise --budget",
        )
    )
    writer.append(
        dict(
            base,
            workload="matmul",
            case_id="matmul/fp32-n64",
            dtype="fp32",
            size=64,
            status="ok",
            median_s=1.0,
            tflops=1.0,
            samples_s=[1.0],
        )
    )
    writer.close()
    text = build_report([tmp_path / "run.csv"], tmp_path / "out", None).read_text()
    section = text.split("## Time to accuracy")[1].split("\n## ")[0]
    assert "83.2% in 2m36s (budget)" in section and "1 stopped by the run budget" in section
    # the time spent is no time to target
    assert "156" not in section.split("83.2%")[0]
    assert "stopped by its budget share after 2m36s" in text.split("## Rows not ok")[1]


def test_time_to_accuracy_candidates_follow_the_winner(tmp_path, easy_data, monkeypatch):
    full = tta.cases(BuildContext(CPU, "full", SyncedClock(CPU)))
    by = {c.design: c for c in full}
    assert not by["template"].raced and by["fastest-epoch"].raced and by["speedrun"].raced
    winner = epoch_race.RaceResult(
        "k", (epoch_race.Entry("fp32", "ok", 10, 1.0), epoch_race.Entry("fp32-cl", "ok", 20, 1.0))
    )
    speedrun = epoch_race.apply_winner(by["speedrun"], winner)
    assert (speedrun.precision, speedrun.channels_last, speedrun.batch_size, speedrun.schedule) == (
        "fp32",
        True,
        512,
        "onecycle",
    )
    monkeypatch.setattr(tta, "race_here", lambda ctx: winner)
    # its placeholder: fp32 without channels_last
    row = run_row(tmp_path, easy_data, case(raced=True))
    assert row["status"] == "ok", row["reason"]
    # what ran, not the placeholder
    assert (row["precision"], row["channels_last"]) == ("fp32", True)
    assert "raced on this machine: fp32-cl won" in row["reason"]
