"""The report's recommendations: per machine, the fastest settings found, in words (the judge's
picks: gpubench.reports.judge.tables)."""

from __future__ import annotations

import math

import pandas as pd

from gpubench.reports.judge.aggregate import per_case
from gpubench.reports.judge.intervals import steady_best
from gpubench.reports.judge.tables import (
    epoch_table,
    fastest_at_equal_accuracy,
    fastest_grad_modes,
)
from gpubench.reports.render.markdown import Md, code
from gpubench.reports.render.units import human


def recommendations(frame: pd.DataFrame) -> dict[str, list[str]]:
    """Per machine, the fastest settings found, in words."""
    advice: dict[str, list[str]] = {}
    for machine, group in frame[frame["status"] == "ok"].groupby("machine"):
        lines = []
        matmul = per_case(group[group["workload"] == "matmul"]).dropna(subset=["tflops"])
        # the Matmul table's rule: a lucky build is not the best
        top = steady_best(matmul, "tflops")
        if top is not None:
            lines.append(
                Md("matmul: {} is fastest ({:.3g} TFLOP/s at n={:.0f})").format(
                    top["dtype"], top["tflops"], top["size"]
                )
            )
        epoch = group[group["workload"] == "mnist_epoch"]
        if not epoch.empty:
            top, _ = fastest_at_equal_accuracy(epoch_table(epoch))
            assert top is not None
            lines.append(
                Md(
                    "training: {} gave the fastest epoch at the template's accuracy ({}, {:.3g} "
                    "samples/s, accuracy {:.3f})"
                ).format(
                    code(top["setting"]),
                    human(top["epoch_s"], "s"),
                    top["samples_per_s"],
                    top["test_accuracy"],
                )
            )
            bound = epoch[epoch["input_bound"] == True]  # noqa: E712 - an object column of True/False/None
            if not bound.empty:
                lines.append(
                    Md("input-bound: {} setting(s) wait for their data loader — prefer {}").format(
                        bound["setting"].nunique(), code(top["setting"])
                    )
                )
        transfer = group[group["workload"] == "transfer"]
        if not transfer.empty:
            by_pin = transfer.groupby("pinned")["gbps"].max()
            if len(by_pin) == 2:
                lines.append(
                    f"transfers: pinned memory peaks at {by_pin.get(True, math.nan):.1f} GB/s "
                    f"against {by_pin.get(False, math.nan):.1f} pageable"
                )
        inference = inference_advice(group[group["workload"] == "inference"])
        if inference:
            lines.append(inference)
        advice[machine] = lines
    return advice


def inference_advice(rows: pd.DataFrame) -> Md | None:
    """The grad mode with the highest throughput where one wins every model and batch size; else
    each mode with the groups it wins. None without two modes to set apart."""
    winners = fastest_grad_modes(rows)
    if not winners:
        return None
    groups = sum(len(labels) for labels in winners.values())
    if len(winners) == 1:
        (mode,) = winners
        return Md(
            "inference: {} gives the highest throughput at each of the {} model and batch size(s) "
            "measured"
        ).format(code(mode), groups)
    per_mode = "; ".join(
        Md("{} at {}").format(code(mode), ", ".join(labels)) for mode, labels in winners.items()
    )
    return Md("inference: the fastest grad mode differs by model and batch: " + per_mode)
