"""Plots (matplotlib, Agg: no display). Each function writes one PNG and returns its path, or
None when the frame has nothing to draw."""

from __future__ import annotations

import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from reports.tables import compile_table, ok_rows  # noqa: E402


def _save(fig: plt.Figure, path: Path) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # long labels: tight_layout does its best
        fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def matmul_plot(frame: pd.DataFrame, out: Path) -> Path | None:
    rows = ok_rows(frame, "matmul")
    if rows.empty:
        return None
    fig, ax = plt.subplots(figsize=(8, 5))
    for (machine, dtype), group in rows.groupby(["machine", "dtype"]):
        group = group.groupby("size")["tflops"].median()
        ax.plot(group.index, group.values, marker="o", label=f"{dtype} · {machine}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("n (square matmul)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title("matmul throughput")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    return _save(fig, out / "matmul_tflops.png")


def bandwidth_plot(frame: pd.DataFrame, workload: str, out: Path) -> Path | None:
    rows = ok_rows(frame, workload)
    if rows.empty:
        return None
    fig, ax = plt.subplots(figsize=(8, 5))
    keys = ["machine", "direction", "pinned", "non_blocking"] if workload == "transfer" else ["machine", "op", "dtype"]
    for key, group in rows.groupby(keys):
        series = group.groupby("size")["gbps"].median()
        label = " · ".join(str(k) for k in key[1:]) + f" · {key[0]}"
        ax.plot(series.index, series.values, marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("bytes per transfer" if workload == "transfer" else "elements per tensor")
    ax.set_ylabel("GB/s")
    ax.set_title(f"{workload} bandwidth" + (" (direction · pinned · non_blocking)" if workload == "transfer" else ""))
    ax.legend(fontsize=6)
    ax.grid(True, which="both", alpha=0.3)
    return _save(fig, out / f"{workload}_gbps.png")


def epoch_plot(frame: pd.DataFrame, out: Path) -> Path | None:
    rows = ok_rows(frame, "mnist_epoch")
    if rows.empty:
        return None
    rows = rows.sort_values("samples_per_s")
    fig, ax = plt.subplots(figsize=(11, 0.35 * len(rows) + 1.5))
    labels = [f"{s} · {m}" for s, m in zip(rows["setting"], rows["machine"])]
    ax.barh(labels, rows["samples_per_s"], color=["tab:red" if b is True else "tab:blue" for b in rows["input_bound"]])
    ax.set_xscale("log")
    ax.set_xlabel("training samples/s, log scale (red: input-bound)")
    ax.set_title("MNIST epoch throughput per setting")
    ax.tick_params(axis="y", labelsize=6)
    return _save(fig, out / "mnist_epoch.png")


def memory_plot(frame: pd.DataFrame, out: Path) -> Path | None:
    rows = ok_rows(frame, "memory_strategies")
    if rows.empty:
        return None
    fig, ax = plt.subplots(figsize=(7, 5))
    for machine, group in rows.groupby("machine"):
        ax.scatter(group["step_s"] * 1e3, group["peak_mem_bytes"] / 2**20, label=machine)
        for _, row in group.iterrows():
            ax.annotate(row["strategy"], (row["step_s"] * 1e3, row["peak_mem_bytes"] / 2**20), fontsize=7)
    ax.set_xlabel("optimizer step (ms)")
    ax.set_ylabel("peak memory (MiB)")
    ax.set_title("out-of-memory strategies: memory against speed")
    ax.legend(fontsize=7)
    return _save(fig, out / "memory_strategies.png")


def compile_plot(frame: pd.DataFrame, out: Path) -> Path | None:
    rows = compile_table(frame).dropna(subset=["gain_pct"])
    if rows.empty:
        return None
    fig, ax = plt.subplots(figsize=(7, 5))
    ax.scatter(rows["compile_s"], rows["gain_pct"])
    for x, y, mode, steps in zip(rows["compile_s"], rows["gain_pct"], rows["compile_mode"], rows["break_even_steps"]):
        ax.annotate(f"{mode} (break-even {steps} steps)", (x, y), fontsize=7)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("compile time, first call (s)")
    ax.set_ylabel("compiled step gain vs eager, same batch (%)")
    ax.set_title("torch.compile: cost against gain")
    return _save(fig, out / "compile.png")
