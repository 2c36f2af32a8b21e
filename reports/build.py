"""`gpubench report`: merged CSV + plots + report.md for every workload present."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from reports import plots, tables
from reports.aggregate import per_case
from reports.load import ReportError, load_energy_notes, load_results, load_top_ops, write_merged
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


def _cases_table(cases: pd.DataFrame, workload: str, columns: list[str]) -> str:
    rows = cases[cases["workload"] == workload]
    return md_table(rows[[c for c in columns if c in rows]], human=True)


def render_report(frame: pd.DataFrame, out: Path, baseline: str | None, top_ops: dict | None = None,
                  energy_notes: dict[str, str] | None = None) -> str:
    """The report's markdown; writes the plots it links into `out`. The summary comes first;
    every table below it holds one row per configuration and case (runs and builds folded)."""
    base = tables.baseline_machine(frame, baseline)
    cases = per_case(frame)
    workloads = set(frame["workload"])
    parts = [f"# gpubench report\n\n{len(frame)} rows from {frame['run_id'].nunique()} run(s) on {frame['machine'].nunique()} configuration(s). "
             f"Baseline: **{base}**. Figures are medians over builds and runs (`±` is the spread between builds: IQR/median); "
             "every timed region ended in a device synchronize."]
    parts.append(section("Summary", md_table(tables.summary(frame, cases, base, energy_notes or {}), index=True)))
    if "matmul" in workloads:
        peak = tables.matmul_peak_table(cases)
        parts.append(section("Matmul", image(_name(plots.matmul_plot(cases, out)), "matmul TFLOP/s"),
                             "Best TFLOP/s per dtype (median over builds), against the datasheet peak where the device is known; "
                             "`spread` is the IQR/median of the builds' TFLOP/s:", md_table(peak, human=True),
                             "<details><summary>Datasheet peaks known to gpubench (dense)</summary>\n\n" + md_table(tables.peaks_table()) + "\n\n</details>"))
    speedup = cases[cases["workload"] == "matmul_speedup"].rename(columns={"baseline_median_s": "cpu_median_s", "median_s": "device_median_s"})
    if not speedup.empty:
        parts.append(section("GPU over CPU (guide §3.3, n=5000 fp32)", md_table(speedup[["machine", "size", "cpu_median_s", "device_median_s", "speedup"]], human=True)))
    for workload in ("transfer", "elementwise"):
        png = plots.bandwidth_plot(cases, workload, out)
        if png:
            parts.append(section(workload.capitalize(), image(png.name, f"{workload} GB/s"), *bandwidth_headline(frame, workload)))
    if "selfcheck" in workloads:
        checks = frame[frame["workload"] == "selfcheck"].assign(failed=lambda f: f["status"] == "failed")
        rows = (checks.groupby(["machine", "size"], sort=False)
                .agg(builds=("status", "size"), failed=("failed", "sum"), median_s=("median_s", "median"),
                     selfcheck_tub_ratio=("selfcheck_tub_ratio", "median"), selfcheck_events_ratio=("selfcheck_events_ratio", "median"))
                .reset_index())
        parts.append(section("Timer self-check", "Median over interleaved pairs of windows of harness / torch.utils.benchmark (and / CUDA events): "
                             "outside 0.97–1.03 a build fails — one of the clocks is wrong (the failures are listed under Rows not ok).",
                             md_table(rows, human=True)))
    speed = tables.speedups(frame, base)
    if not speed.empty:
        parts.append(section(f"Speedups against {base}", "Geometric mean over the cases both machines ran (above 1: faster than the baseline).", md_table(speed)))
    if "mnist_epoch" in workloads:
        notes = "**Accuracy is meaningless on `synthetic` data.**" if (frame["dataset"] == "synthetic").any() else ""
        parts.append(section("MNIST training epoch", image(_name(plots.epoch_plot(cases, out)), "epoch throughput"),
                             f"Guide template against the fastest setting whose test accuracy is within {tables.EQUAL_ACCURACY} of the template's "
                             "(faster but less accurate settings are listed apart). Diverged runs are failed rows and never count:",
                             md_table(tables.template_vs_fastest(frame), human=True),
                             "Medians over builds and runs; `spread` is the IQR/median of the epoch's windows of steps.",
                             md_table(tables.epoch_table(frame), human=True), notes))
        compiled = tables.compile_table(frame)
        if not compiled.empty:
            parts.append(section("torch.compile", image(_name(plots.compile_plot(frame, out)), "compile cost"),
                                 "Cold first-call compile time (fresh dynamo state, empty inductor cache) against the steady-state step, "
                                 "eager and compiled on the same batch; break-even = compile time / step gain.", md_table(compiled, human=True)))
    if "time_to_accuracy" in workloads:
        parts.append(section("Time to accuracy", "MLPerf's clock: from the first touch of the data to the evaluation that reaches the target "
                             "(every evaluation inside it; model construction, warm-up and compile outside). Scored over seeds with the "
                             "olympic mean (fastest and slowest dropped); a seed that did not converge counts as the slowest, two make the "
                             "result invalid. `fastest_seed_s`/`slowest_seed_s` span the converged seeds.",
                             md_table(tables.first_to_target(frame), human=True), md_table(tables.time_to_accuracy_table(frame), human=True)))
    if "memory_strategies" in workloads:
        parts.append(section("Out-of-memory strategies (guide §8.5)", image(_name(plots.memory_plot(cases, out)), "memory vs speed"),
                             "`mem_source`: cuda-allocator = the caching allocator's peak; cpu-profiler = the CPU allocator's peak over one step above "
                             "what was alive before it (never compare the two).",
                             _cases_table(cases, "memory_strategies", ["machine", "strategy", "mem_source", "effective_batch", "peak_mem_bytes", "step_s", "spread", "samples_per_s"])))
    if "inference" in workloads:
        parts.append(section("Inference", _cases_table(cases, "inference", ["machine", "model", "batch_size", "grad_mode", "samples_per_s", "latency_s", "spread", "flags"])))
    if "ddp" in workloads:
        parts.append(section("Multi-process training", _cases_table(cases, "ddp", ["machine", "parallel", "backend", "world_size", "samples_per_s",
                                                                                "samples_per_s_per_rank", "step_s", "scaling_efficiency"])))
    parts.append(profiler_section(frame, top_ops or {}))
    advice = tables.recommendations(frame)
    parts.append(section("Recommendations", "\n".join(f"- **{m}**\n" + "\n".join(f"  - {line}" for line in lines) for m, lines in advice.items())))
    flags = tables.flagged(frame)
    if not flags.empty:
        parts.append(section("Flagged figures", "Ok rows whose figure needs care: `noisy` (IQR/median above 5%), `one-sample`, "
                             "`short-rounds`, `cache` (cache-resident working set), `busy` (other processes used > 25% of the CPU), "
                             "`busy-gpu` (another process on the GPU), `throttled` (the GPU throttled during the timed region). Counted per build.", md_table(flags)))
    skipped = tables.not_ok_grouped(frame)
    count = int((frame["status"] != "ok").sum())
    parts.append(section("Rows not ok", f"{count} rows were skipped, failed or ran out of memory, grouped by reason.", md_table(skipped)))
    parts.append(section("Machines", md_table(tables.machines_table(frame), index=True)))
    return "\n\n".join(p for p in parts if p) + "\n"


def build_report(paths: list[Path], out: Path, baseline: str | None) -> Path:
    """Validate and merge `paths`, write out/merged.csv, the plots and out/report.md."""
    frame = load_results(paths)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ReportError(f"cannot create {out} ({error.strerror}) — pass --out with a writable folder") from None
    (out / "report.md").unlink(missing_ok=True)  # an older report must not pass for this one until it is done
    write_merged(frame, out / "merged.csv")
    report = out / "report.md"
    text = render_report(frame, out, baseline, load_top_ops(paths), load_energy_notes(paths))
    partial = out / "report.md.partial"  # report.md appears whole, last: a folder without it is incomplete
    partial.write_text(text, encoding="utf-8")
    partial.replace(report)
    return report
