"""Each sentence of the report set against the rows of the table beside it: like for like (same
model, batch, dtype), never a figure pooled over groups that one group's rows refute."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd

import pytest

from gpubench.reports.judge import tables
from gpubench.reports.render import build, sections
from gpubench.reports.render.advice import inference_advice, recommendations

# These tests read the report's text, not its pixels (conftest.unrendered_plots).
pytestmark = pytest.mark.usefixtures("unrendered_plots")

EXAMPLES = Path(__file__).parent.parent / "reports" / "examples"

# samples/s: no_grad is lowest at mlp bs256 (one busy build) and below inference_mode at bs1,
# fastest at cnn bs1; pooled over groups, no_grad's median is the highest
INFERENCE = {
    ("mlp", 1): {"grad": 17.2e3, "no_grad": 19.1e3, "inference_mode": 19.3e3},
    ("mlp", 256): {"grad": 368e3, "no_grad": 217e3, "inference_mode": 373e3},
    ("cnn", 1): {"grad": 3.11e3, "no_grad": 3.42e3, "inference_mode": 3.28e3},
    ("cnn", 256): {"grad": 3.56e3, "no_grad": 220e3, "inference_mode": 3.81e3},
}


def inference_rows(
    figures: dict[tuple[str, int], dict[str, float]], machine: str = "m"
) -> pd.DataFrame:
    rows = [
        {
            "machine": machine,
            "workload": "inference",
            "case_id": f"inference/{model}-bs{batch}-{mode}",
            "setting": f"{model}-bs{batch}-{mode}",
            "status": "ok",
            "run_id": "r",
            "flags": "",
            "build": build,
            "model": model,
            "batch_size": batch,
            "grad_mode": mode,
            "samples_per_s": rate * (1 + build / 100),
            "median_s": batch / rate,
            "tflops": float("nan"),
        }
        for (model, batch), modes in figures.items()
        for mode, rate in modes.items()
        for build in range(3)
    ]
    return pd.DataFrame(rows)


def claimed_winners(sentence: str) -> dict[str, str]:
    """`group -> mode` as the sentence says it, for a sentence that names each group."""
    per_mode = sentence.split("by model and batch: ", 1)[1].split("; ")
    return {
        group: mode.strip("`")
        for part in per_mode
        for mode, groups in [part.split(" at ", 1)]
        for group in groups.split(", ")
    }


def test_the_inference_advice_names_each_groups_fastest_mode_when_they_differ() -> None:
    sentence = str(inference_advice(inference_rows(INFERENCE)))
    # no one mode is fastest everywhere here
    assert "gives the highest" not in sentence
    table = {
        f"{model} bs{batch}": max(modes, key=modes.get)
        for (model, batch), modes in INFERENCE.items()
    }
    assert claimed_winners(sentence) == table


def test_one_mode_is_named_only_where_it_wins_every_group() -> None:
    uniform = {
        group: {**modes, "inference_mode": max(modes.values()) * 1.1}
        for group, modes in INFERENCE.items()
    }
    sentence = str(inference_advice(inference_rows(uniform)))
    assert sentence == (
        "inference: `inference_mode` gives the highest throughput at each of the 4 model and batch "
        "size(s) measured"
    )


def test_the_recommendations_table_carries_the_like_for_like_sentence() -> None:
    advice = recommendations(inference_rows(INFERENCE))
    assert [line for line in advice["m"] if line.startswith("inference")] == [
        inference_advice(inference_rows(INFERENCE))
    ]


def epoch_rows(windows_spread: float, epochs_s: dict[str, list[float]]) -> pd.DataFrame:
    """One row per build of each setting; `rel_iqr` is the spread of the step windows inside that
    build's epoch."""
    return pd.DataFrame(
        [
            {
                "machine": "m",
                "workload": "mnist_epoch",
                "case_id": f"mnist_epoch/{setting}",
                "setting": setting,
                "status": "ok",
                "run_id": "r",
                "flags": "",
                "dataset": "mnist",
                "epoch_s": seconds,
                "rel_iqr": windows_spread,
                "samples_per_s": 60000 / seconds,
                "data_wait_frac": 0.1,
                "test_accuracy": 0.86,
                "input_bound": False,
            }
            for setting, builds in epochs_s.items()
            for seconds in builds
        ]
    )


def test_plus_minus_is_the_spread_between_builds_and_windows_are_named_apart() -> None:
    one_build = tables.epoch_table(epoch_rows(1.99, {"guide-template": [60.9]}))
    assert pd.isna(one_build["spread"].iloc[0]) and one_build["windows_spread"].iloc[0] == 1.99
    answer = build.setting_line(epoch_rows(1.99, {"guide-template": [60.9]}), pd.DataFrame(), "m")
    # 199% is of the windows inside one epoch, not between builds
    assert "±" not in answer
    three = tables.epoch_table(epoch_rows(0.5, {"guide-template": [10.0, 11.0, 12.0]}))
    assert three["spread"].iloc[0] == pytest.approx((11.5 - 10.5) / 11.0)
    cell = sections.epoch_settings(pd.concat([three.assign(machine=m) for m in "abcdefghijklm"]))
    assert "11 s ±9% windows ±50%" in cell


def test_the_header_says_what_each_plus_minus_means(tmp_path: Path) -> None:
    text = build.build_report([EXAMPLES / "cpu-2core-quick.csv"], tmp_path / "out", None).read_text(
        encoding="utf-8"
    )
    head = text.split("\n## ")[0]
    assert (
        "`±` is the spread between builds" in head
        and "`windows ±` is the spread of the step windows" in head
    )
    epochs = text.split("## MNIST training epoch")[1].split("\n## ")[0]
    assert "windows ±" in epochs


def test_the_epoch_races_settings_are_in_the_report_beside_the_run(tmp_path: Path) -> None:
    """The race's samples/s per setting lived only in epoch-race.json: the report shows them, with
    the accuracy of an epoch the run trained in that setting."""
    results = tmp_path / "results"
    results.mkdir()
    for name in ("epoch.csv", "epoch.env.json", "epoch-race.json"):
        shutil.copy(EXAMPLES / "h200" / name, results / name)
    text = build.build_report([results], tmp_path / "out", None).read_text(encoding="utf-8")
    race = text.split("## Epoch race: precision and memory format")[1].split("\n## ")[0]
    assert "| vm · NVIDIA H200 (cuda:0) | fp32 | 90.4 k samples/s | 85.4% |" in race
    assert "| vm · NVIDIA H200 (cuda:0) | bf16 | 77.9 k samples/s | 86.0% |" in race
    # no epoch trained in it
    assert "| vm · NVIDIA H200 (cuda:0) | fp16-cl | 67 k samples/s |  |" in race
    assert text.index("## MNIST training epoch") < text.index("## Epoch race")
    # the smoke race of the same machine is not this run's
    assert "smoke" not in race and race.count("| fp32 |") == 1


def test_the_input_bound_advice_counts_settings_not_builds() -> None:
    rows = epoch_rows(0.1, {"guide-template": [30.0, 31.0, 32.0], "preloaded": [10.0, 10.5, 11.0]})
    rows["input_bound"] = rows["setting"].eq("guide-template")
    advice = [
        line
        for line in recommendations(rows.assign(tflops=float("nan")))["m"]
        if line.startswith("input-bound")
    ]
    assert advice == ["input-bound: 1 setting(s) wait for their data loader — prefer `preloaded`"]


def test_skip_reasons_that_differ_only_in_their_measured_times_are_one_group() -> None:
    reason = (
        "fp16 on cpu has no fast kernels (an n=256 fp16 matmul took {} ms against {} ms in fp32 "
        "here)"
    )
    rows = pd.DataFrame(
        [
            {
                "machine": "m",
                "workload": "mnist_epoch",
                "status": "skipped",
                "case_id": f"e/{i}",
                "setting": f"fp16-{i}",
                "reason": reason.format(fp16, fp32),
            }
            for i, (fp16, fp32) in enumerate(((41.5, 0.208), (1.2e03, 0.211)))
        ]
    )
    grouped = tables.not_ok_grouped(rows)
    assert len(grouped) == 1 and grouped["rows"].iloc[0] == 2
