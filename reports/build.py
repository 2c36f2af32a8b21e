"""`gpubench report`: merged CSV + plots + report.md for every workload present."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from reports import plots, tables
from reports.load import ReportError, load_results, load_top_ops
from reports.markdown import image, md_table, section

__all__ = ["ReportError", "build_report", "render_report"]


def _name(path: Path | None) -> str | None:
    return path.name if path else None


def profiler_section(frame: pd.DataFrame, top_ops: dict[str, dict[str, list[dict]]]) -> str:
    """Guide §9.6: per machine, the top operators of the guide template and of the fastest epoch."""
    parts = []
    epochs = tables.ok_rows(frame, "mnist_epoch")
    for machine, group in epochs.groupby("machine"):
        best, _ = tables.fastest_at_equal_accuracy(tables.epoch_table(group))
        fastest = group[group["setting"] == best["setting"]].iloc[0] if best is not None else None
        template = group[group["setting"] == tables.TEMPLATE_SETTING]
        for label, row in (("guide template", template.iloc[0] if not template.empty else None), ("fastest setting", fastest)):
            ops = top_ops.get(str(row["source_file"]), {}).get(str(row["case_id"])) if row is not None else None
            if ops:
                parts.append(f"**{machine}**, {label} (`{row['setting']}`), 10 training steps:\n\n" + md_table(tables.top_ops_table(ops)))
    return section("Profiler: top operators (--profile-ops)", *parts) if parts else ""


def bandwidth_headline(frame: pd.DataFrame, workload: str) -> list[str]:
    """Best GB/s per machine. For elementwise the headline is DRAM-resident sizes only (working set
    >= 8x the last-level cache); cache-resident figures are shown apart, labelled."""
    rows = tables.ok_rows(frame, workload)
    if workload != "elementwise":
        return [md_table(rows.groupby("machine")["gbps"].max().rename("best_gbps"), index=True)]
    by_tier = rows.groupby(["machine", "memory_tier"])["gbps"].max().unstack("memory_tier")
    note = "Best GB/s by memory tier: `dram` = working set >= 8x the last-level cache (the memory headline), `cache` = fits in it."
    return [note, md_table(by_tier, index=True)]


def render_report(frame: pd.DataFrame, out: Path, baseline: str | None, top_ops: dict | None = None) -> str:
    """The report's markdown; writes the plots it links into `out`."""
    base = tables.baseline_machine(frame, baseline)
    workloads = set(frame["workload"])
    parts = [f"# gpubench report\n\n{len(frame)} rows from {frame['run_id'].nunique()} run(s) on {frame['machine'].nunique()} machine(s). "
             f"Baseline: **{base}**. Times are medians of raw per-round samples; every timed region ended in a device synchronize."]
    parts.append(section("Machines", md_table(tables.machines_table(frame), index=True)))
    if "matmul" in workloads:
        peak = tables.matmul_peak_table(frame)
        parts.append(section("Matmul", image(_name(plots.matmul_plot(frame, out)), "matmul TFLOP/s"),
                             "Best TFLOP/s per dtype (median over builds), against the datasheet peak where the device is known; "
                             "`spread` is the IQR/median of the builds' TFLOP/s:", md_table(peak),
                             "<details><summary>Datasheet peaks known to gpubench (dense)</summary>\n\n" + md_table(tables.peaks_table()) + "\n\n</details>"))
    rows = tables.ok_rows(frame, "matmul_speedup")[["machine", "size", "baseline_median_s", "median_s", "speedup"]]
    if not rows.empty:
        parts.append(section("GPU over CPU (guide §3.3, n=5000 fp32)", md_table(rows.rename(columns={"baseline_median_s": "cpu_median_s", "median_s": "device_median_s"}))))
    for workload in ("transfer", "elementwise"):
        png = plots.bandwidth_plot(frame, workload, out)
        if png:
            parts.append(section(workload.capitalize(), image(png.name, f"{workload} GB/s"), *bandwidth_headline(frame, workload)))
    if "selfcheck" in workloads:
        rows = frame[frame["workload"] == "selfcheck"][["machine", "size", "status", "median_s", "selfcheck_tub_ratio", "selfcheck_events_ratio", "reason"]]
        parts.append(section("Timer self-check", "Median over interleaved pairs of windows of harness / torch.utils.benchmark (and / CUDA events): "
                             "outside 0.97–1.03 the row fails — one of the clocks is wrong.", md_table(rows)))
    speed = tables.speedups(frame, base)
    if not speed.empty:
        parts.append(section(f"Speedups against {base}", "Geometric mean over the cases both machines ran (above 1: faster than the baseline).", md_table(speed)))
    if "mnist_epoch" in workloads:
        notes = "**Accuracy is meaningless on `synthetic` data.**" if (frame["dataset"] == "synthetic").any() else ""
        parts.append(section("MNIST training epoch", image(_name(plots.epoch_plot(frame, out)), "epoch throughput"),
                             f"Guide template against the fastest setting whose test accuracy is within {tables.EQUAL_ACCURACY} of the template's "
                             "(faster but less accurate settings are listed apart). Diverged runs are failed rows and never count:",
                             md_table(tables.template_vs_fastest(frame)),
                             "Medians over builds and runs; `spread` is the IQR/median of the epoch's windows of steps.",
                             md_table(tables.epoch_table(frame)), notes))
        compiled = tables.compile_table(frame)
        if not compiled.empty:
            parts.append(section("torch.compile", image(_name(plots.compile_plot(frame, out)), "compile cost"),
                                 "First-call compile time against the steady-state step, eager and compiled on the same batch; "
                                 "break-even = compile time / step gain.", md_table(compiled)))
    if "memory_strategies" in workloads:
        rows = (tables.ok_rows(frame, "memory_strategies").groupby(["machine", "strategy", "mem_source"], sort=False)
                [["effective_batch", "peak_mem_bytes", "step_s", "samples_per_s"]].median().reset_index())
        parts.append(section("Out-of-memory strategies (guide §8.5)", image(_name(plots.memory_plot(frame, out)), "memory vs speed"), md_table(rows)))
    if "inference" in workloads:
        rows = tables.ok_rows(frame, "inference")[["machine", "model", "batch_size", "grad_mode", "samples_per_s", "latency_s"]]
        parts.append(section("Inference", md_table(rows)))
    if "ddp" in workloads:
        rows = tables.ok_rows(frame, "ddp")[["machine", "parallel", "backend", "world_size", "samples_per_s", "samples_per_s_per_rank", "step_s", "scaling_efficiency"]]
        parts.append(section("Multi-process training", md_table(rows)))
    parts.append(profiler_section(frame, top_ops or {}))
    advice = tables.recommendations(frame)
    parts.append(section("Recommendations", "\n".join(f"- **{m}**\n" + "\n".join(f"  - {line}" for line in lines) for m, lines in advice.items())))
    flags = tables.flagged(frame)
    if not flags.empty:
        parts.append(section("Flagged figures", "Ok rows whose figure needs care: `noisy` (IQR/median above 5%), `one-sample`, "
                             "`short-rounds`, `cache` (cache-resident working set), `busy` (other processes used > 25% of the CPU), "
                             "`busy-gpu` (another process on the GPU). Counted per build.", md_table(flags)))
    skipped = tables.not_ok(frame)
    parts.append(section("Rows not ok", f"{len(skipped)} rows were skipped, failed or ran out of memory; each says why.", md_table(skipped)))
    return "\n\n".join(p for p in parts if p) + "\n"


def build_report(paths: list[Path], out: Path, baseline: str | None) -> Path:
    """Validate and merge `paths`, write out/merged.csv, the plots and out/report.md."""
    frame = load_results(paths)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ReportError(f"cannot create {out} ({error.strerror}) — pass --out with a writable folder") from None
    frame.drop(columns=["samples", "machine", "setting", "source_file"]).to_csv(out / "merged.csv", index=False)
    report = out / "report.md"
    report.write_text(render_report(frame, out, baseline, load_top_ops(paths)), encoding="utf-8")
    return report
