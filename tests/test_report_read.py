"""What a reader found reading a whole report end to end (docs/validation/report-read.md): each
place where one part of the report said what another part refuted."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from gpubench.reports.render.build import build_report
from gpubench.reports.judge.references import FIGURES

# These tests read the report's text, not its pixels (conftest.unrendered_plots).
pytestmark = pytest.mark.usefixtures("unrendered_plots")

EXAMPLES = Path(__file__).resolve().parent.parent / "reports" / "examples"
QUICK, FULL = EXAMPLES / "cpu-2core-quick.csv", EXAMPLES / "cpu-2core-tta-full.csv"


def section_text(report: str, title: str) -> str:
    return report.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_a_machine_whose_runs_differ_in_a_field_shows_every_value_of_it(tmp_path: Path) -> None:
    """Machines once took each machine's first row: 'Alike on every machine: … profile quick' while
    Before and after said 'the sides differ in profiles (BASE quick; NEW full)'."""
    text = build_report([QUICK, FULL], tmp_path / "report", None).read_text(encoding="utf-8")
    assert "BASE quick; NEW full" in section_text(text, "Before and after")
    machines = section_text(text, "Machines")
    assert "profile quick, full" in machines
    assert "profile quick." not in machines


@pytest.fixture
def example(example_report: str) -> str:
    """The example report as this code writes it from the committed example CSVs (conftest)."""
    return example_report


def test_the_answer_and_the_epoch_section_say_one_ratio(example: str) -> None:
    """The answer read '3.9x the guide template's 3.46 s', the epoch section '3.95x faster than the
    guide template': one ratio, two roundings."""
    answer = example.split("\n\n")[1]
    said = re.search(r", ([\d.]+)x the guide template's", answer)
    assert said, answer
    epoch = section_text(example, "MNIST training epoch")
    assert f"`preloaded` is {said.group(1)}x faster than the guide template" in epoch


def test_an_empty_history_names_the_figures_it_follows(example: str) -> None:
    """'no machine here has two runs with a headline figure' stood beside a summary whose CPU column
    read 2 runs and a time-to-accuracy headline: History follows fewer figures than the summary
    shows, and says which."""
    line = next(line for line in example.splitlines() if line.startswith("**History:**"))
    assert "with a headline figure" not in line
    for figure in FIGURES.values():
        assert figure.label in line, figure.label


def test_the_flagged_counts_say_a_build_with_two_flags_counts_under_each(example: str) -> None:
    """The summary counts flagged rows (60 on the CPU), the Flagged table each flag's builds (66 in
    all): a build flagged noisy and short-rounds is under both, and the table says so."""
    flagged = section_text(example, "Flagged figures")
    counted = sum(int(n) for n in re.findall(r": (\d+) builds?\b", flagged))
    summary_row = next(
        line
        for line in section_text(example, "Summary").splitlines()
        if line.startswith("| flagged · not ok rows |")
    )
    rows = sum(int(cell.split(" · ")[0]) for cell in summary_row.strip(" |").split(" | ")[1:])
    assert counted > rows
    assert "a build with several flags counts under each" in flagged


def cpu_rows_where(tmp_path: Path, keep) -> Path:
    """The committed 2-core run with only the rows `keep` picks (by workload and case id without its
    workload)."""
    with open(QUICK, newline="", encoding="utf-8") as handle:
        header, *rows = list(csv.reader(handle))
    kept = [
        row
        for row in rows
        if keep(row[header.index("workload")], row[header.index("case_id")].split("/")[-1])
    ]
    path = tmp_path / "cpu.csv"
    with open(path, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([header, *kept])
    return path


def test_a_template_that_is_its_own_fastest_setting_is_not_faster_than_itself(
    tmp_path: Path,
) -> None:
    """A busy run that measured only the template read '`guide-template` is 1x faster than the guide
    template'."""
    only = cpu_rows_where(
        tmp_path, lambda workload, setting: workload != "mnist_epoch" or setting == "guide-template"
    )
    epoch = section_text(
        build_report([only], tmp_path / "report", None).read_text(encoding="utf-8"),
        "MNIST training epoch",
    )
    assert "faster than the guide template" not in epoch
    assert "the guide template is the fastest setting measured" in epoch


def test_the_windows_spread_reads_as_a_percentage_in_every_epoch_table(tmp_path: Path) -> None:
    """One machine's epoch table printed windows_spread as 0.21 where the pivoted table says
    'windows ±21%'."""
    epoch = section_text(
        build_report([QUICK], tmp_path / "report", None).read_text(encoding="utf-8"),
        "MNIST training epoch",
    )
    header, _, *rows = [
        line.strip("|").split(" | ") for line in epoch.splitlines() if line.startswith("| ")
    ]
    column = [cell.strip() for cell in header].index("windows_spread")
    assert all(re.fullmatch(r"[\d.]+%", row[column].strip()) for row in rows), rows


def test_a_section_intro_ends_without_a_dangling_space(tmp_path: Path) -> None:
    """Time to accuracy's intro ended in a space where no design reached its target."""
    with open(QUICK, newline="", encoding="utf-8") as handle:
        header, *rows = list(csv.reader(handle))
    # one design, none reached: the section has no first design to name and one row
    rows = [row for row in rows if "speedrun" not in row[header.index("case_id")]]
    for row in rows:
        if row[header.index("workload")] == "time_to_accuracy":
            row[header.index("status")] = "unreached"
            row[header.index("time_to_target_s")] = ""
            row[header.index("reason")] = (
                "stopped by its budget share after 13 s at 69.8% (target 85%)"
            )
    path = tmp_path / "unreached.csv"
    with open(path, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([header, *rows])
    text = build_report([path], tmp_path / "report", None).read_text(encoding="utf-8")
    assert "| unreached |" in section_text(text, "Rows not ok") or "unreached" in section_text(
        text, "Rows not ok"
    )
    assert not [line for line in text.splitlines() if line.endswith(" ")]


def test_a_share_of_matmul_in_the_summary_names_the_matmul_it_divides_by(tmp_path: Path) -> None:
    """The summary read 'attention forward 0.0105 TFLOP/s, 1766% of matmul' two rows below 'matmul
    bf16, best 0.00116 TFLOP/s' (that is 905%): the share is of the attention build's own matmul,
    0.000592 TFLOP/s."""
    from test_attention import attention_row

    from gpubench.harness.records.results import ResultsWriter
    from gpubench.harness.records.schema import SCHEMA_VERSION

    writer = ResultsWriter(tmp_path, "run")
    # the matmul case read twice what the attention build's own matmul did
    writer.append(
        {
            "schema_version": SCHEMA_VERSION,
            "run_id": "run",
            "machine_id": "m",
            "hostname": "h",
            "device": "cpu",
            "device_name": "cpu",
            "workload": "matmul",
            "case_id": "matmul/bf16-n64",
            "dtype": "bf16",
            "size": 64,
            "build": 0,
            "status": "ok",
            "median_s": 0.01,
            "samples_s": [0.01],
            "tflops": 4.0,
        }
    )
    writer.append(attention_row("fwd", "flash", 1.5))
    writer.close()
    summary = section_text(
        build_report([tmp_path / "run.csv"], tmp_path / "out", None).read_text(encoding="utf-8"),
        "Summary",
    )
    row = next(
        line for line in summary.splitlines() if line.startswith("| attention forward, best |")
    )
    assert "1.5 TFLOP/s, 75% of its build's bf16 matmul (2 TFLOP/s" in row


@pytest.mark.drawn
def test_the_memory_plot_keys_its_red_edges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A busy run's memory strategies plot edged its bars in red with no key saying why (the epoch
    plot has one)."""
    from gpubench.reports.render import bar_plots
    from gpubench.reports.judge.aggregate import per_case
    from gpubench.reports.judge.load import load_results

    texts: list[str] = []
    save = bar_plots._save

    def capture(fig, path):
        texts.extend(t.get_text() for legend in fig.legends for t in legend.get_texts())
        return save(fig, path)

    monkeypatch.setattr(bar_plots, "_save", capture)
    frame = load_results([QUICK])
    frame = frame.assign(
        flags=frame["flags"].where(frame["workload"] != "memory_strategies", "busy")
    )
    assert bar_plots.memory_plot(per_case(frame), tmp_path) is not None
    assert bar_plots.BUSY_EDGE in texts


def test_no_intro_is_said_twice(example: str) -> None:
    """A folding slip joined the first-design lines with the whole of time to accuracy's intro
    between them."""
    paragraphs = [p for p in example.split("\n\n") if not p.startswith(("|", "#", "!["))]
    sentences = [s for p in paragraphs for s in re.split(r"(?<=\.) ", p) if len(s) > 60]
    assert len(sentences) == len(set(sentences)), [s for s in sentences if sentences.count(s) > 1][
        :2
    ]
