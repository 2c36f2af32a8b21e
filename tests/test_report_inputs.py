"""The report and compare on input a person (or a hostile machine owner) may hand them: labels
that hold markdown, HTML and control characters; runs whose rows are all not ok; odd sidecars;
impossible figures; schema-1 rows next to current ones."""

from __future__ import annotations

import csv
import re
from pathlib import Path

from harness.cli import main
from reports.build import build_report

EXAMPLES = Path(__file__).resolve().parent.parent / "reports" / "examples"
CPU, H200 = EXAMPLES / "cpu-2core-quick.csv", EXAMPLES / "h200-quick.csv"  # schema 3 and schema 1
# one label holding every way text can change a markdown document's structure
PAYLOAD = "a|b\n# H1\r\n[x](http://e) *em* _u_ `t` <img src=x onerror=alert(1)> ~~s~~ \\ !\x00\x07\x1b"
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


CELL_SPLIT = re.compile(r"(?<!\\)\|")  # GitHub splits table cells at unescaped pipes


def structure(text: str) -> dict[str, object]:
    """What a markdown renderer builds from the text: headings, tables (cells per row), links,
    emphasis and raw HTML."""
    lines = text.split("\n")
    return {"headings": [line.split(" ", 1)[0] for line in lines if line.startswith("#")],
            "table rows": [len(CELL_SPLIT.split(line)) for line in lines if line.startswith("|")],
            "links": len(re.findall(r"(?<!\\)\[[^\]\n]*(?<!\\)\]\(", text)),
            "strong": len(re.findall(r"(?<!\\)\*\*", text)),
            "html": len(re.findall(r"<(?!/?(details|summary)>)", text))}


def test_hostile_labels_change_nothing_in_the_report_structure(tmp_path):
    clean = build_report([relabel(CPU, tmp_path / "clean.csv", "x"), H200], tmp_path / "clean", baseline=None)
    hostile = build_report([relabel(CPU, tmp_path / "hostile.csv", PAYLOAD), H200], tmp_path / "hostile", baseline=None)
    text = hostile.read_text(encoding="utf-8")
    assert structure(text) == structure(clean.read_text(encoding="utf-8"))
    assert "<img" not in text and "# H1" not in text.replace("\\# H1", "")
    for output in (hostile, tmp_path / "hostile" / "merged.csv"):
        assert not re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", output.read_text(encoding="utf-8")), output


def test_hostile_labels_change_nothing_in_compare_output(tmp_path, capsys):
    hostile = relabel(CPU, tmp_path / "hostile.csv", PAYLOAD)
    main(["compare", str(hostile), str(hostile)])
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("|")]
    assert len(rows) > 2 and {len(CELL_SPLIT.split(row)) for row in rows} == {10}  # 8 cells between 9 pipes
    assert "<img" not in out and not any(line.startswith("#") for line in out.splitlines())
    assert "\x00" not in out and "a\\|b" in out  # the case ids are quoted, escaped


def test_schema_1_epochs_compare_like_for_like_with_current_ones():
    """The committed examples: the H200's v1 epoch rows timed a whole epoch as median_s, the
    CPU's current ones a step; the H200 was 0.0354x the 2-core CPU on mnist_epoch."""
    from reports.load import load_results
    from reports.tables import baseline_machine, speedups

    frame = load_results([EXAMPLES])
    v1 = frame[(frame["workload"] == "mnist_epoch") & (frame["device"] == "cuda:0")]
    assert len(v1) == 7 and (v1["median_s"] == v1["step_s"]).all() and (v1["median_s"] < 0.05).all()
    speed = speedups(frame, baseline_machine(frame, None)).set_index("workload")
    assert speed.loc["mnist_epoch", "geomean_speedup"] > 1  # an H200 step is faster than a 2-core CPU's
    assert not frame["setting"].str.contains(r"\d\.0(?:-|$)").any()  # bs1024, not bs1024.0
    assert {"preloaded-bf16-cl-bs1024", "dataloader-w2"} <= set(frame["setting"])
