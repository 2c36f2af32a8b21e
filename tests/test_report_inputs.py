"""The report and compare on input a person (or a hostile machine owner) may hand them: labels
that hold markdown, HTML and control characters; runs whose rows are all not ok; odd sidecars;
impossible figures; schema-1 rows next to current ones."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from gpubench.harness.commands.cli import main
from gpubench.reports.render.build import build_report
from gpubench.reports.judge.load import load_results
from gpubench.harness.core.exits import UsageError

# These tests read the report's tables, notes and files, not its pixels (conftest.unrendered_plots).
pytestmark = pytest.mark.usefixtures("unrendered_plots")

EXAMPLES = Path(__file__).resolve().parent.parent / "reports" / "examples"
# schema 3 and schema 1
CPU, H200 = EXAMPLES / "cpu-2core-quick.csv", EXAMPLES / "h200-quick.csv"
# one label holding every way text can change a markdown document's structure
PAYLOAD = (
    "$\\frac$ a|b\n# H1\r\n[x](http://e) *em* _u_ `t` <img src=x onerror=alert(1)> ~~s~~ \\ "
    "!\x00\x07\x1b"
)
LABELS = ("hostname", "device_name", "dataset", "model", "flags")


def relabel(src: Path, dst: Path, text: str) -> Path:
    """`src` with `text` put into every label a machine's owner or a failure controls."""
    with open(src, newline="", encoding="utf-8") as handle:
        header, *rows = list(csv.reader(handle))
    for row in rows:
        for column in LABELS:
            row[header.index(column)] = text + row[header.index(column)]
        row[header.index("case_id")] += text
        if row[header.index("status")] != "ok":
            row[header.index("reason")] = text + row[header.index("reason")]
    with open(dst, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([header, *rows])
    return dst


# GitHub splits table cells at unescaped pipes
CELL_SPLIT = re.compile(r"(?<!\\)\|")


def structure(text: str) -> dict[str, object]:
    """What a markdown renderer builds from the text: headings, tables (cells per row), links,
    emphasis and raw HTML."""
    lines = text.split("\n")
    return {
        "headings": [line.split(" ", 1)[0] for line in lines if line.startswith("#")],
        "table rows": [len(CELL_SPLIT.split(line)) for line in lines if line.startswith("|")],
        "links": len(re.findall(r"(?<!\\)\[[^\]\n]*(?<!\\)\]\(", text)),
        "strong": len(re.findall(r"(?<!\\)\*\*", text)),
        "html": len(re.findall(r"<(?!/?(details|summary)>)", text)),
    }


def test_hostile_labels_change_nothing_in_the_report_structure(tmp_path):
    clean = build_report(
        [relabel(CPU, tmp_path / "clean.csv", "x"), H200], tmp_path / "clean", baseline=None
    )
    hostile = build_report(
        [relabel(CPU, tmp_path / "hostile.csv", PAYLOAD), H200], tmp_path / "hostile", baseline=None
    )
    text = hostile.read_text(encoding="utf-8")
    assert structure(text) == structure(clean.read_text(encoding="utf-8"))
    assert "<img" not in text and "# H1" not in text.replace("\\# H1", "")
    for output in (hostile, tmp_path / "hostile" / "merged.csv"):
        assert not re.search(
            r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", output.read_text(encoding="utf-8")
        ), output


def test_hostile_labels_change_nothing_in_compare_output(tmp_path, capsys):
    hostile = relabel(CPU, tmp_path / "hostile.csv", PAYLOAD)
    main(["compare", str(hostile), str(hostile)])
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("|")]
    # 8 cells between 9 pipes
    assert len(rows) > 2 and {len(CELL_SPLIT.split(row)) for row in rows} == {10}
    assert "<img" not in out and not any(line.startswith("#") for line in out.splitlines())
    # the case ids are quoted, escaped
    assert "\x00" not in out and "a\\|b" in out


def test_schema_1_epochs_compare_like_for_like_with_current_ones():
    """The committed examples: the H200's v1 epoch rows timed a whole epoch as median_s, the
    CPU's current ones a step; the H200 was 0.0354x the 2-core CPU on mnist_epoch."""
    from gpubench.reports.judge.load import load_results
    from gpubench.reports.judge.tables import baseline_machine, speedups

    # the example report's runs
    frame = load_results(sorted(EXAMPLES.glob("*.csv")))
    # the measured runs only
    frame = frame[~frame["source_file"].astype(str).str.contains("SYNTHETIC")]
    v1 = frame[(frame["workload"] == "mnist_epoch") & (frame["device"] == "cuda:0")]
    assert len(v1) == 7 and (v1["median_s"] == v1["step_s"]).all() and (v1["median_s"] < 0.05).all()
    speed = speedups(frame, baseline_machine(frame, None)).set_index("workload")
    # an H200 step is faster than a 2-core CPU's
    assert speed.loc["mnist_epoch", "geomean_speedup"] > 1
    # bs1024, not bs1024.0
    assert not frame["setting"].str.contains(r"\d\.0(?:-|$)").any()
    assert {"preloaded-bf16-cl-bs1024", "dataloader-w2"} <= set(frame["setting"])


# ---- a report for every loadable input
# ---------------------------------------------------------------


def rows_of(src: Path) -> tuple[list[str], list[list[str]]]:
    with open(src, newline="", encoding="utf-8") as handle:
        header, *rows = list(csv.reader(handle))
    return header, rows


def write(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([header, *rows])
    return path


def test_a_run_whose_every_row_was_skipped_gets_a_report_with_its_rows_not_ok(tmp_path):
    header, rows = rows_of(CPU)
    # `-k transfer` on a CPU: all skipped
    transfers = [row for row in rows if row[header.index("workload")] == "transfer"]
    text = build_report(
        [write(tmp_path / "t.csv", header, transfers)], tmp_path / "out", None
    ).read_text(encoding="utf-8")
    assert (
        f"{len(transfers)} rows were skipped, stopped before their target (unreached), failed or "
        "ran out of memory"
        in text
        and "| transfer | skipped |" in text
    )


def test_a_machine_whose_every_row_failed_among_others_gets_its_column_and_its_rows_not_ok(
    tmp_path,
):
    header, rows = rows_of(CPU)
    dead = [list(row) for row in rows[:30]]
    for row in dead:
        row[header.index("status")], row[header.index("reason")] = (
            "failed",
            "RuntimeError: the machine died",
        )
        (
            row[header.index("machine_id")],
            row[header.index("hostname")],
            row[header.index("run_id")],
        ) = "dead", "deadbox", "deadrun"
    text = build_report(
        [CPU, H200, write(tmp_path / "dead.csv", header, dead)], tmp_path / "out", None
    ).read_text(encoding="utf-8")
    summary = text.split("## Summary", 1)[1].split("\n\n")[1]
    # flagged · not ok rows
    assert "deadbox" in summary.splitlines()[0] and "| 0 · 30 |" in summary
    assert "RuntimeError: the machine died" in text.split("## Rows not ok", 1)[1]


@pytest.mark.parametrize(
    "sidecar",
    [
        "",
        "null",
        "[1, 2]",
        '"text"',
        '{"mnist_epoch/guide-template": "text"}',
        '{"mnist_epoch/guide-template": [1, {"calls": 3}, {"op": "aten::mm", '
        '"device_time_us": "x"}]}',
    ],
)
def test_an_odd_profiler_sidecar_is_left_out_with_a_note(tmp_path, sidecar):
    # the epochs a profiler table describes: the sidecar's note is the subject, not the sections
    header, rows = rows_of(CPU)
    csv_path = write(
        tmp_path / CPU.name,
        header,
        [row for row in rows if row[header.index("workload")] == "mnist_epoch"],
    )
    (tmp_path / f"{CPU.stem}.ops.json").write_text(sidecar, encoding="utf-8")
    text = build_report([csv_path], tmp_path / "out", None).read_text(encoding="utf-8")
    assert f"Note: {CPU.stem}.ops.json is not (wholly) a profiler table" in text.replace("\\_", "_")


@pytest.mark.parametrize("column", ["tflops", "gbps", "epoch_s", "samples_per_s", "median_s"])
def test_ok_rows_without_their_figure_are_refused_with_a_note_and_the_report_goes_on(
    tmp_path, column
):
    header, rows = rows_of(CPU)
    # the ok rows that report this figure (one section or two), and the rows not ok, which stay in
    # the report
    rows = [row for row in rows if row[header.index(column)] or row[header.index("status")] != "ok"]
    for row in rows:
        row[header.index(column)] = ""
    path = write(tmp_path / "empty.csv", header, rows)
    text = build_report([path], tmp_path / "out", None).read_text(encoding="utf-8")
    assert "## Rows refused" in text and f"column {column} is empty in an ok row" in text.replace(
        "\\_", "_"
    )


def test_a_repeated_column_refuses_its_file_and_files_with_other_headers_load(tmp_path):
    """A column named twice refuses its file (which of the two holds the figure?); a later file's
    extra column loads (the union of the headers: its values kept)."""
    header, rows = rows_of(CPU)
    first = write(
        tmp_path / "a" / "first.csv", [*header, "hostname"], [[*row, "again"] for row in rows[:5]]
    )
    with pytest.raises(
        UsageError,
        match=r"first.csv: the header names column hostname twice \(columns \d+ and \d+\)",
    ):
        load_results([first])
    first = write(tmp_path / "a" / "first.csv", header, rows[:5])
    later = write(
        tmp_path / "b" / "later.csv",
        [*header, "newer_column"],
        [[*row[:1], "run2", *row[2:], "kept"] for row in rows[5:10]],
    )
    frame = load_results([first, later])
    assert (
        set(frame["hostname"]) == {"vm"}
        and frame["newer_column"].tolist() == [None] * 5 + ["kept"] * 5
    )
    assert build_report([first, later], tmp_path / "out", None).is_file()


# ---- impossible figures: refused with file, line and column
# ------------------------------------------

IMPOSSIBLE = [
    ("matmul", "tflops", "-5", "negative"),
    ("matmul", "gbps", "-1.5", "negative"),
    ("inference", "samples_per_s", "-3", "negative"),
    ("mnist_epoch", "test_accuracy", "7.5", "outside [0, 1]"),
    ("matmul", "median_s", "-0.5", "negative"),
    ("matmul", "median_s", "nan", "not a finite number"),
    ("matmul", "tflops", "inf", "not a finite number"),
    ("matmul", "tflops", "1e400", "not a finite number"),
    ("elementwise", "pct_of_peak_gbps", "-2", "negative"),
]


def impossible_file(folder: Path, workload: str, column: str, value: str) -> tuple[Path, int, int]:
    """The CPU run with `column` of its first ok `workload` row set to `value`: (file, that row's
    index, rows)."""
    header, rows = rows_of(CPU)
    at = next(
        i
        for i, row in enumerate(rows)
        if row[header.index("workload")] == workload and row[header.index("status")] == "ok"
    )
    rows[at][header.index(column)] = value
    return write(folder / "impossible.csv", header, rows), at, len(rows)


@pytest.mark.parametrize(("workload", "column", "value", "why"), IMPOSSIBLE)
def test_an_impossible_figure_refuses_its_row_naming_file_line_and_column(
    tmp_path, workload, column, value, why
):
    path, at, count = impossible_file(tmp_path, workload, column, value)
    refused: list[str] = []
    frame = load_results([path], refused)
    assert (
        refused == [f"{path}:{at + 2}: column {column} = {value} is impossible ({why})"]
        and len(frame) == count - 1
    )


def test_a_refused_row_is_named_in_the_report_and_left_out_of_its_merged_csv(tmp_path):
    """Which figure was impossible is load_results' (the test above, for each kind); the report's
    part is the same for all."""
    path, at, count = impossible_file(tmp_path, "matmul", "tflops", "-5")
    out = tmp_path / "out"
    text = build_report([path], out, None).read_text(encoding="utf-8")
    assert (
        "1 row(s) refused as impossible" in text
        and f"{at + 2}: column" in text.split("## Rows refused", 1)[1]
    )
    assert len(load_results([out / "merged.csv"])) == count - 1


def test_tflops_above_the_datasheet_peak_is_refused(tmp_path):
    # schema 1: upgraded, then screened
    header, rows = rows_of(H200)
    at = next(
        i
        for i, row in enumerate(rows)
        if row[header.index("case_id")].startswith("matmul/")
        and row[header.index("dtype")] == "bf16"
    )
    rows[at][header.index("tflops")] = "2000.0"
    path = write(tmp_path / "h200.csv", header, rows)
    refused: list[str] = []
    load_results([path], refused)
    assert refused == [
        f"{path}:{at + 2}: column tflops = 2000 is impossible (above the bf16 datasheet peak 989.4 "
        "TFLOP/s of NVIDIA H200)"
    ]


def test_a_store_read_twice_names_each_refused_row_once(tmp_path, monkeypatch):
    """A store over CHUNK_FILES files: a chunk refuses an impossible row, a later file is no
    results, and the store is read again without it; the refused row is still named once, not once
    per read."""
    # every file its own chunk, as past 100 files
    monkeypatch.setattr("gpubench.harness.records.results_reader.CHUNK_FILES", 1)
    header, rows = rows_of(CPU)
    at = next(
        i
        for i, row in enumerate(rows)
        if row[header.index("workload")] == "matmul" and row[header.index("status")] == "ok"
    )
    bad = [list(row) for row in rows]
    bad[at][header.index("tflops")] = "-5"
    store = tmp_path / "store"
    impossible = write(store / "a" / "r1.csv", header, bad)
    write(store / "a" / "r2.csv", header, [[*row[:1], "r2", *row[2:]] for row in rows])
    (store / "z").mkdir()
    (store / "z" / "stray.csv").write_text("not,results\n1,2\n", encoding="utf-8")
    refused, left_out = [], []
    frame = load_results([store], refused, left_out)
    assert refused == [f"{impossible}:{at + 2}: column tflops = -5 is impossible (negative)"]
    assert len(left_out) == 1 and "stray.csv" in left_out[0] and len(frame) == 2 * len(rows) - 1


def test_the_committed_examples_hold_nothing_impossible():
    refused: list[str] = []
    # the example report's runs, and the H200 GPU check's
    assert len(load_results([EXAMPLES], refused)) == 295 + 229 and refused == []


@pytest.mark.parametrize("tail", ["\n", "  \n", "\n  ", "\r\n\t\r\n", " "])
def test_a_trailing_blank_line_is_no_truncated_row(tmp_path, tail):
    path = tmp_path / "blank.csv"
    path.write_bytes(CPU.read_bytes() + tail.encode())
    assert len(load_results([path])) == 118


# ---- compare across devices ----------------------------------------------------------------------


def test_compare_across_devices_is_refused_in_one_line(capsys):
    assert main(["compare", str(CPU), str(H200)]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        len(err.splitlines()) == 1
        and "BASE ran on cpu · AMD EPYC, NEW on cuda · NVIDIA H200: across devices" in err
    )


def on_device(
    rows: list[list[str]],
    header: list[str],
    run_id: str,
    device: str = "cpu",
    name: str = "AMD EPYC",
) -> list[list[str]]:
    """The CPU example's rows as if run on another device of the same machine (another run)."""
    out = [list(row) for row in rows]
    for row in out:
        (
            row[header.index("run_id")],
            row[header.index("device")],
            row[header.index("device_name")],
        ) = run_id, device, name
    return out


def test_compare_with_several_devices_per_side_judges_each_device_alone(tmp_path, capsys):
    header, rows = rows_of(CPU)
    base = write(
        tmp_path / "base.csv",
        header,
        on_device(rows, header, "b1") + on_device(rows, header, "b2", "cuda:0", "NVIDIA H200"),
    )
    new = write(
        tmp_path / "new.csv",
        header,
        on_device(rows, header, "n1") + on_device(rows, header, "n2", "cuda:1", "NVIDIA A100"),
    )
    main(["compare", str(base), str(new)])
    out = capsys.readouterr().out
    assert (
        "rows on cuda · NVIDIA H200 (only in BASE) not judged" in out
        and ("rows on cuda · NVIDIA A100 (only in NEW) not judged") in out
    )
    # no verdict line across devices
    assert "H200 |" not in out and "A100 |" not in out
    both = write(
        tmp_path / "both.csv",
        header,
        on_device(rows, header, "c1") + on_device(rows, header, "c2", "cuda:0", "NVIDIA H200"),
    )
    main(["compare", str(base), str(both)])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| matmul/")]
    # judged per device
    assert {line.split(" | ")[0].split(" @ ")[1] for line in lines} == {
        "cpu · AMD EPYC",
        "cuda · NVIDIA H200",
    }


# a label typeset as a formula can also stop the drawing
@pytest.mark.drawn
def test_plot_labels_from_the_files_are_never_typeset_as_formulas(tmp_path, monkeypatch):
    """A hostname holding a pair of '$' would be typeset by matplotlib's mathtext (or stop the
    plot)."""
    from matplotlib import cbook

    from gpubench.reports.render import plots

    texts: list[str] = []
    save = plots._save

    def capture(fig, path):
        texts.extend(t.get_text() for legend in fig.legends for t in legend.get_texts())
        texts.extend(ax.get_title() for ax in fig.axes)
        return save(fig, path)

    monkeypatch.setattr(plots, "_save", capture)
    header, rows = rows_of(CPU)
    for row in rows:
        row[header.index("hostname")] = "$x^2$ box"
    build_report([write(tmp_path / "dollar.csv", header, rows), H200], tmp_path / "out", None)
    assert any("x^2" in text for text in texts) and not any(
        cbook.is_math_text(text) for text in texts
    )


def test_the_committed_example_report_is_what_this_code_writes(example_report):
    """The README and docs show reports/examples/report/report.md as the report a user gets: rebuilt
    from the committed runs by this code (its pixels aside; conftest's example_report), it reads the
    same. Refresh it with
    `gpubench report reports/examples/*.csv --out reports/examples/report --baseline vm`."""
    assert example_report == (EXAMPLES / "report" / "report.md").read_text(encoding="utf-8")


def as_profile(src: Path, dst: Path, profile: str) -> Path:
    with open(src, newline="", encoding="utf-8") as handle:
        header, *rows = list(csv.reader(handle))
    for row in rows:
        row[header.index("profile")] = profile
        # another run, not a copy of the same one
        row[header.index("run_id")] += f"-{profile}"
        # other figures than the real case's, agreeing
        if profile == "smoke" and row[header.index("median_s")]:
            row[header.index("median_s")] = str(float(row[header.index("median_s")]) * 10)
            for rate in ("tflops", "gbps", "samples_per_s", "tokens_per_s"):
                if rate in header and row[header.index(rate)]:
                    row[header.index(rate)] = str(float(row[header.index(rate)]) / 10)
    with open(dst, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([header, *rows])
    return dst


def section_text(report: str, title: str) -> str:
    return report.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_smoke_rows_never_meet_a_reference_nor_the_summary(tmp_path):
    """Like with like: the smoke profile's 2,048-image epoch once stood in the summary as the H200's
    epoch and against the full epoch's reference ('ratio 9.47, ok'). Its rows stay in the workload
    tables only."""
    smoke = as_profile(H200, tmp_path / "h200-smoke.csv", "smoke")
    text = build_report([CPU, smoke], tmp_path / "mixed", baseline=None).read_text(encoding="utf-8")
    assert (
        "row(s) of the smoke profile test the suite at tiny sizes — their figures are not for "
        "comparison" in text.split("## Summary")[0]
    )
    assert "H200" not in section_text(text, "Summary") and "H200" not in section_text(
        text, "Recommendations"
    )
    # a smoke run is no point in a machine's history
    assert "## History" not in text or "H200" not in section_text(text, "History")
    # the CPU has no reference; the H200's smoke rows meet none
    assert "## Health against references" not in text
    # still shown where its workload is
    assert "H200" in section_text(text, "Matmul")
    both = build_report(
        [H200, as_profile(H200, tmp_path / "h200-smoke.csv", "smoke")],
        tmp_path / "both",
        baseline=None,
    )
    assert section_text(both.read_text(encoding="utf-8"), "Matmul") == section_text(
        # no smoke row folded into a median
        build_report([H200], tmp_path / "quick-only", baseline=None).read_text(encoding="utf-8"),
        "Matmul",
    )
    alone = build_report([smoke], tmp_path / "alone", baseline=None).read_text(encoding="utf-8")
    assert "Smoke-profile rows only: nothing here is a figure to compare" in section_text(
        alone, "Summary"
    )
    assert "## Health against references" not in alone
    quick = build_report([CPU, H200], tmp_path / "quick", baseline=None).read_text(encoding="utf-8")
    assert "H200" in section_text(quick, "Summary") and "smoke-profile" not in quick


def test_the_report_answers_first_which_machine_and_setting_is_fastest_and_how_sure(tmp_path):
    text = build_report([CPU, H200], tmp_path / "report", baseline="vm").read_text(encoding="utf-8")
    answer = text.split("\n\n")[1]
    assert (
        answer.startswith("**Answer:** **vm · NVIDIA H200 (cuda:0)** is the fastest, ")
        and "x (95% " in answer
    )
    assert (
        "against vm · AMD EPYC (cpu); its fastest training epoch at the template's accuracy is `"
        in answer
    )
    alone = (
        build_report([CPU], tmp_path / "alone", baseline=None)
        .read_text(encoding="utf-8")
        .split("\n\n")[1]
    )
    assert alone.startswith(
        "**Answer:** on **vm · AMD EPYC (cpu)**, the fastest training epoch at the template's "
        "accuracy is `"
    )


def test_busy_rows_get_a_banner_above_every_figure(tmp_path):
    with open(CPU, newline="", encoding="utf-8") as handle:
        header, *rows = list(csv.reader(handle))
    for row in [r for r in rows if r[header.index("status")] == "ok"][:3]:
        row[header.index("flags")] = "busy"
    text = build_report(
        [write(tmp_path / "busy.csv", header, rows)], tmp_path / "report", baseline=None
    ).read_text(encoding="utf-8")
    assert (
        "> **3 row(s) were measured while another process used the CPU (`busy`)"
        in text.split("## Summary")[0]
    )


def test_a_long_table_of_several_machines_reads_a_column_per_machine():
    report = (EXAMPLES / "report" / "report.md").read_text(encoding="utf-8")
    inference = section_text(report, "Inference")
    assert (
        "| model | batch_size | vm · AMD EPYC (cpu) | synthetic-degraded-h200 · NVIDIA H200 "
        "(cuda:0) | vm · NVIDIA H200 (cuda:0) |"
    ) in inference
    # the grad modes of a model and batch folded into one cell per machine
    assert (
        "| mlp | 1 | grad 17.2 k samples/s ±48% (noisy) · no_grad 19.1 k samples/s ±34% (noisy) · "
        "inference_mode 19.3 k samples/s ±46% (noisy) | grad 11.1 k samples/s · no_grad 12.6 k "
        "samples/s · inference_mode 8.45 k samples/s |"
    ) in inference
    epoch = section_text(report, "MNIST training epoch")
    assert (
        "| guide-template | 3.46 s, accuracy 86.2%, data wait 67.4% | 29.9 s windows ±11%, "
        "accuracy 86.0%, data wait 3.1% (noisy) |"
    ) in epoch
    assert "| machine |" not in section_text(
        report, "Out-of-memory strategies: peak memory against step time"
    )
