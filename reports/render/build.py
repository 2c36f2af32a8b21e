"""`gpubench report`: merged CSV + plots + report.md for every workload present. The report opens
with the answer to the question it was run for (which machine, which setting is fastest, by how
much, how sure), and the banners that say which figures are not for comparison."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gpubench.harness.catalog import specs
from gpubench.harness.core.console import CONSOLE
from gpubench.harness.core.exits import UsageError
from gpubench.harness.core.workload_spec import ReportSection
from gpubench.harness.records.safe_files import RefusedPath, replace_bytes
from gpubench.reports.judge import tables
from gpubench.reports.judge.aggregate import per_case
from gpubench.reports.judge.intervals import fastest_machine
from gpubench.reports.judge.load import (
    OUT_FIX,
    load_env_sidecars,
    load_results,
    load_top_ops,
    spreadsheet_safe,
    write_merged,
)
from gpubench.reports.judge.ownership import dedupe
from gpubench.reports.judge.same_dtype import same_dtype_pct
from gpubench.reports.judge.screen import is_smoke, shadowed_smoke, trusted
from gpubench.reports.judge.settled import busy_flagged, set_aside_note, undisturbed
from gpubench.reports.judge.text import short_label
from gpubench.reports.render import (
    before_after,
    health,
    history,
    machines,
    race,
    sections,
    summary,
)
from gpubench.reports.render.advice import recommendations
from gpubench.reports.render.markdown import Md, code, escape, md_table, section
from gpubench.reports.render.publish import report_folder
from gpubench.reports.render.units import human

# a CUDA kernel's name is a C++ template signature of 200 characters and more: its head names it
OP_CHARS = 60


def top_ops_table(ops: list[dict]) -> pd.DataFrame:
    """A sidecar's first ten operators, names cut at their argument list; a missing or non-numeric
    time is empty (the sidecar keeps them whole)."""
    frame = pd.DataFrame(ops[:10]).reindex(
        columns=["op", "calls", "device_time_us", "self_cpu_time_us"]
    )
    frame["op"] = [
        short_label(op[: op.rfind("(")] if op.endswith(")") else op, OP_CHARS)
        for op in frame["op"].astype(str)
    ]
    times_us = frame[["device_time_us", "self_cpu_time_us"]].apply(pd.to_numeric, errors="coerce")
    return frame.assign(
        device_ms=times_us["device_time_us"] / 1e3, self_cpu_ms=times_us["self_cpu_time_us"] / 1e3
    )[["op", "calls", "device_ms", "self_cpu_ms"]]


def profiler_section(frame: pd.DataFrame, top_ops: dict[str, dict[str, list[dict]]]) -> str:
    """Profiling the top operators: per machine, those of the template epoch and of the fastest
    epoch."""
    parts = []
    epochs = tables.ok_rows(frame, "mnist_epoch")
    for machine, group in epochs.groupby("machine"):
        best, _ = tables.fastest_at_equal_accuracy(tables.epoch_table(group))
        fastest = group[group["setting"] == best["setting"]].iloc[0] if best is not None else None
        for label, row in (
            ("guide template", tables.template_row(group)),
            ("fastest setting", fastest),
        ):
            ops = (
                top_ops.get(str(row["source_file"]), {}).get(str(row["case_id"]))
                if row is not None
                else None
            )
            if ops:
                parts.append(
                    Md("**{}**, {} ({}), 10 training steps:\n\n").format(
                        machine, label, code(row["setting"])
                    )
                    + md_table(top_ops_table(ops))
                )
    return section("Profiler: top operators (--profile-ops)", *parts) if parts else ""


def speedup_section(frame: pd.DataFrame, base: str) -> str:
    speed = tables.speedups(frame, base)
    if speed.empty:
        return ""
    if sections.several_machines(speed, rows=0):
        cells = [
            f"{g:.3g}x (95% {lo:.3g}–{hi:.3g}; {n} cases, {mn:.3g}–{mx:.3g})"
            for g, lo, hi, n, mn, mx in zip(
                speed["geomean_speedup"],
                speed["ci95_low"],
                speed["ci95_high"],
                speed["cases"],
                speed["min"],
                speed["max"],
            )
        ]
        speed = sections.machine_columns(speed, ["workload"], cells)
    return section(
        f"Speedups against {base}",
        "Geometric mean over the cases both machines ran (above 1: faster than the baseline); "
        "with several machines a cell reads `geomean (95% interval; cases, min–max)`.",
        md_table(speed),
    )


def outcome_sections(frame: pd.DataFrame, measured: pd.DataFrame, refused: list[str]) -> list[str]:
    """Recommendations (from `measured` rows: no advice from the suite's own test sizes), flagged
    figures, rows not ok, rows refused and the machines: every report ends with them."""
    # no empty bullet
    advice = {machine: lines for machine, lines in recommendations(measured).items() if lines}
    parts = [section("Recommendations", md_table(advice_table(advice)))] if advice else []
    flags = tables.flagged(frame)
    if not flags.empty:
        parts.append(
            section(
                "Flagged figures",
                "Ok rows whose figure needs care: `noisy` (IQR/median above 5%), `one-sample`, "
                "`short-rounds`, `cache` (cache-resident working set), `busy` (other processes "
                "used > 25% of the CPU), `busy-gpu` (another process on the GPU), `throttled` "
                "(the GPU throttled during the timed region), `impossible` (a figure past its "
                "bound: left out of the summary). Counted per build; a build with several flags "
                "counts under each.",
                md_table(flags),
            )
        )
    count = int((frame["status"] != "ok").sum())
    parts.append(
        section(
            "Rows not ok",
            f"{count} rows were skipped, stopped before their target (unreached), "
            "failed or ran out of memory, grouped by reason.",
            md_table(tables.not_ok_grouped(frame)),
        )
    )
    if refused:
        parts.append(
            section(
                "Rows refused",
                f"{len(refused)} rows hold a figure no measurement can give, or none: "
                "left out of every table above.",
                "\n".join(f"- {escape(line)}" for line in refused),
            )
        )
    parts.append(machines.render(frame))
    return parts


def advice_table(advice: dict[str, list[str]]) -> pd.DataFrame:
    """A row per topic (`topic: advice` lines), a column per machine; cells keep their markdown
    (code spans)."""
    cells: dict[str, dict[str, Md]] = {}
    for machine, lines in advice.items():
        for line in lines:
            topic, _, text = str(line).partition(": ")
            cells.setdefault(machine, {})[topic] = (
                Md(text) if isinstance(line, Md) else escape(text)
            )
    table = pd.DataFrame(cells).rename_axis("topic").reset_index()
    return table.astype(object).where(table.notna(), Md(""))


# between the micro-benchmarks and the training workloads
SPEEDUPS_ORDER = 55


def workload_sections(
    frame: pd.DataFrame,
    cases: pd.DataFrame,
    out: Path,
    base: str,
    races: pd.DataFrame | None = None,
) -> list[str]:
    """Each workload present, by its declared section, in declared order, the speedups and the epoch
    race among them."""
    present = set(frame["workload"])
    declared = [
        (spec.report.order, name, spec.report)
        for name, spec in specs().items()
        if name in present and spec.report is not None
    ]
    undeclared = [(1000, name, ReportSection(name)) for name in sorted(present - set(specs()))]
    parts: list[tuple[int, str]] = [(SPEEDUPS_ORDER, speedup_section(frame, base))]
    if races is not None:
        parts.append((race.ORDER, race.render(races, frame)))
    parts += [
        (
            order,
            (sections.RENDERERS[report.renderer] if report.renderer else sections.generic)(
                frame, cases, out, report, name
            ),
        )
        for order, name, report in declared + undeclared
    ]
    return [text for _, text in sorted(parts, key=lambda part: part[0])]


def setting_line(frame: pd.DataFrame, cases: pd.DataFrame, machine: str) -> str:
    """The fastest epoch at the template's accuracy against the template; else the best matmul."""
    epochs = tables.epoch_table(frame[frame["machine"] == machine])
    best, _ = tables.fastest_at_equal_accuracy(epochs) if not epochs.empty else (None, None)
    if best is not None:
        t, versus = tables.template_row(epochs), ""
        if t is not None and best["setting"] != tables.TEMPLATE_SETTING:
            versus = (
                f", {t['epoch_s'] / best['epoch_s']:.3g}x the guide template's "
                f"{human(t['epoch_s'], 's')}{summary.pm(t['spread'])}"
            )
        return (
            f"its fastest training epoch at the template's accuracy is {code(best['setting'])}: "
            f"{human(best['epoch_s'], 's')}{summary.pm(best['spread'])}, accuracy "
            f"{best['test_accuracy']:.3f}{versus}"
        )
    declared = [
        f"{label}: {cell}"
        for label, cell in summary.declared_summary(cases, machine).items()
        if "fastest" in label
    ]
    # a --model run, a transformer run: the workload's own fastest figure
    if declared:
        return declared[0]
    matmul = summary.best_of(cases, machine, cases["workload"] == "matmul", "tflops")
    if matmul is not None:
        return (
            f"its fastest matmul is {matmul['dtype']} at n={matmul['size']:.0f}: "
            f"{matmul['tflops']:.3g} TFLOP/s{summary.pm(matmul['spread'])}"
        )
    return ""


def answer(frame: pd.DataFrame, cases: pd.DataFrame, baseline: str) -> str:
    """One line: the fastest machine (with its interval) and its fastest setting (with its
    spread)."""
    if frame.empty:
        return ""
    several = frame["machine"].nunique() > 1
    winner, interval = (
        fastest_machine(frame, baseline) if several else (str(frame["machine"].iloc[0]), None)
    )
    parts = ["", setting_line(frame, cases, winner)]
    if interval is not None:
        parts[0] = (
            f"**{escape(winner)}** is the fastest, {escape(interval.text())} against "
            f"{escape(baseline)}"
        )
    elif several:
        parts[0] = (
            f"no configuration is surely faster than the baseline {escape(baseline)} "
            "(every speedup's 95% interval reaches 1x or below)"
        )
    elif parts[1]:
        parts[1] = f"on **{escape(winner)}**, " + (
            f"the {parts[1][4:]}" if parts[1].startswith("its ") else parts[1]
        )
    text = "; ".join(p for p in parts if p)
    return f"**Answer:** {text}." if text else ""


def banners(frame: pd.DataFrame, smoke: pd.Series) -> list[str]:
    """Warnings a reader must see before any figure: smoke rows, and rows measured on a busy
    machine."""
    out = []
    if smoke.any():
        out.append(
            f"> **Smoke run: {int(smoke.sum())} row(s) of the smoke profile test the suite at "
            "tiny sizes — their figures are not for comparison** (they appear in the workload "
            "tables only, never in the summary or against a reference)."
        )
    busy = int(busy_flagged(frame[frame["status"] == "ok"]).sum())
    if busy:
        out.append(
            f"> **{busy} row(s) were measured while another process used the CPU (`busy`) or the "
            "GPU "
            "(`busy-gpu`)**: they may read slow; `gpubench compare` widens their noise and calls "
            "a difference "
            'the load alone could explain "cannot judge: busy".'
        )
    return out


def runs_sections(kept: pd.DataFrame, out: Path) -> list[str]:
    """History and Before and after; a history with nothing in it yet is a line of Before and after
    where that has a section."""
    past, pair = history.render(kept, out), before_after.render(kept)
    if pair and history.NONE_YET in past:
        return [f"{pair}\n\n**History:** {history.NONE_YET}"]
    return [past, pair]


def render_report(
    frame: pd.DataFrame,
    out: Path,
    baseline: str | None,
    top_ops: dict | None = None,
    energy_notes: dict[str, str] | None = None,
    notes: list[str] | None = None,
    refused: list[str] | None = None,
    power_caps_w: dict[str, float] | None = None,
    races: pd.DataFrame | None = None,
) -> str:
    """The report's markdown; writes the plots it links into `out`. Below the summary, every table
    holds one row per configuration and case (runs and builds folded)."""
    base = tables.baseline_machine(frame, baseline)
    smoke = is_smoke(frame)
    # like with like: a smoke epoch of 2,048 images is no epoch to set against a full one
    measured = undisturbed(frame[~smoke])
    kept, kept_cases, left_out = trusted(measured, same_dtype_pct(per_case(measured)))
    head = [
        answer(kept, kept_cases, base),
        *banners(frame, smoke),
        f"{len(frame)} rows from {frame['run_id'].nunique()} run(s) on "
        f"{frame['machine'].nunique()} configuration(s). Baseline: **{escape(base)}**. Figures "
        "are medians over builds and runs (`±` is the spread between builds: IQR/median; "
        "`windows ±` is the spread of the step windows inside one epoch; in the summary, `95% "
        "a–b` is where another run on this machine would read the figure: its builds' spread and "
        "the noise between identical runs, 4%, or 8% for a case built once per run); every timed "
        "region ended in a device synchronize."
        + "".join(
            f" Note: {escape(note)}." for note in [*(notes or []), set_aside_note(frame)] if note
        ),
    ]
    parts = ["# gpubench report\n\n" + "\n\n".join(line for line in head if line)]
    if measured.empty:
        parts.append(
            section(
                "Summary",
                "Smoke-profile rows only: nothing here is a figure to compare. Run the quick "
                "or full profile for one.",
            )
        )
    # every measured row has a figure past its bound
    elif kept.empty:
        parts.append(section("Summary", summary.left_out_lines(measured, left_out)))
    else:
        headline = summary.summary(
            kept, kept_cases, base, energy_notes or {}, measured[left_out.notna()]
        )
        parts.append(
            section(
                "Summary",
                md_table(headline, index=True),
                summary.left_out_lines(measured, left_out),
            )
        )
        parts += [health.render(kept, kept_cases, power_caps_w), *runs_sections(kept, out)]
    shown = undisturbed(frame[~shadowed_smoke(frame, smoke)])
    parts += workload_sections(shown, same_dtype_pct(per_case(shown)), out, base, races)
    parts.append(profiler_section(frame, top_ops or {}))
    parts += outcome_sections(frame, measured, refused or [])
    return "\n\n".join(p for p in parts if p) + "\n"


# rows refused named on stderr; all of them are in report.md
SHOWN_REFUSALS = 5


def build_report(paths: list[Path], out: Path, baseline: str | None) -> Path:
    """Validate and merge `paths`, then write merged.csv, the plots and report.md into a new folder
    that becomes `out` whole: every argument is checked before anything is written, and a failed
    report leaves `out` as it was."""
    # rows with impossible figures: named under "Rows refused", never shown
    refused: list[str] = []
    # files in the folders that are not readable results (a store's stray or live files)
    left_out: list[str] = []
    # a run given twice (a file and its folder, a copy) counts once everywhere
    # machine ids older rows were written with, and the ones they read as
    renamed: dict[str, set[str]] = {}
    frame, notes = dedupe(load_results(paths, refused, left_out, renamed), left_out)
    top_ops, (energy_notes, power_caps_w) = (
        load_top_ops(paths, notes),
        load_env_sidecars(paths, left_out),
    )
    races = race.load_races(paths, left_out, renamed)
    # a --baseline that names no machine: refused before `out` is touched
    tables.baseline_machine(frame, baseline)
    # said where the person looks, and in the report
    for line in dict.fromkeys(left_out):
        CONSOLE.note(f"note: left out of this report: {line}")
    notes = [f"left out of this report: {line}" for line in dict.fromkeys(left_out)] + notes
    # the rest are in report.md: a damaged store could hold thousands
    for line in refused[:SHOWN_REFUSALS]:
        CONSOLE.note(f"note: row refused: {line}")
    if len(refused) > SHOWN_REFUSALS:
        CONSOLE.note(
            f"note: {len(refused) - SHOWN_REFUSALS} more row(s) refused, listed under Rows refused"
        )
    notes += (
        [f"{len(refused)} row(s) refused as impossible, listed under Rows refused"]
        if refused
        else []
    )
    # every file below is made inside the new folder under a random name and renamed: no link is
    # followed
    try:
        with report_folder(out) as folder:
            write_merged(spreadsheet_safe(frame), folder / "merged.csv")
            text = render_report(
                frame, folder, baseline, top_ops, energy_notes, notes, refused, power_caps_w, races
            )
            replace_bytes(folder, "report.md", text.encode("utf-8"), "report folder", OUT_FIX)
        return out / "report.md"
    except RefusedPath as error:
        raise UsageError(str(error)) from None
    except OSError as error:
        raise UsageError(
            f"cannot write the report in {out} ({error.strerror or error}) "
            "— pass --out with a writable folder"
        ) from None
