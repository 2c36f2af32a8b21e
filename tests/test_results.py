"""The results CSV: the writer, the reader, the schema's types, and what a full disk, a killed
run or a damaged file leaves."""

import csv
import errno
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpubench.harness.records.results import (
    ResultsFull,
    ResultsWriter,
    check_run_id,
    check_writable,
    new_run_id,
    write_sidecar,
)
from gpubench.harness.core.exits import UsageError
from gpubench.harness.records.results_reader import read_rows
from gpubench.harness.records.schema import (
    BY_NAME,
    COLUMNS,
    REQUIRED_COLUMNS,
    SCHEMA_VERSION,
    SchemaError,
)
from gpubench.reports.judge.load import load_results
from gpubench.reports.render.units import human_column

REPO = Path(__file__).resolve().parent.parent


def row(case_id: str, **extra):
    return dict(
        {
            "schema_version": SCHEMA_VERSION,
            "run_id": "r",
            "workload": "matmul",
            "case_id": case_id,
            "median_s": 0.125,
            "status": "ok",
            "samples_s": [0.125, 0.25],
        },
        **extra,
    )


def test_required_columns_are_in_the_schema():
    assert set(REQUIRED_COLUMNS) <= set(COLUMNS)


def test_round_trip(tmp_path):
    writer = ResultsWriter(tmp_path, "run1")
    writer.append(row("a"))
    writer.append(row("b", status="skipped", reason="tf32 is CUDA-only"))
    writer.close()
    rows = read_rows(tmp_path / "run1.csv")
    assert [r["case_id"] for r in rows] == ["a", "b"]
    assert rows[0]["median_s"] == 0.125 and rows[0]["schema_version"] == SCHEMA_VERSION
    assert rows[0]["samples_s"] == [0.125, 0.25]
    assert rows[1]["reason"] == "tf32 is CUDA-only" and rows[1]["tflops"] is None


def test_schema_types_every_column_when_read(tmp_path):
    writer = ResultsWriter(tmp_path, "typed")
    writer.append(
        row(
            "a",
            pinned=True,
            non_blocking=False,
            size=2**20,
            batch_size=None,
            gbps=12.5,
            input_bound=False,
            rounds=7,
        )
    )
    writer.close()
    (got,) = read_rows(tmp_path / "typed.csv")
    assert got["pinned"] is True and got["non_blocking"] is False and got["input_bound"] is False
    assert got["size"] == 2**20 and isinstance(got["size"], int) and got["rounds"] == 7
    assert got["gbps"] == 12.5 and got["batch_size"] is None


def test_units_and_groups_are_declared_once():
    assert (
        BY_NAME["median_s"].unit == "s"
        and BY_NAME["peak_mem_bytes"].unit == "bytes"
        and BY_NAME["tflops"].unit == "TFLOP/s"
    )
    assert (
        BY_NAME["pinned"].kind == "bool"
        and BY_NAME["case_id"].group == "case"
        and BY_NAME["hostname"].group == "run"
    )
    assert human_column("median_s", 3.69e-05) == "36.9 µs"
    assert human_column("peak_mem_bytes", 1614901248) == "1.5 GiB"
    assert human_column("samples_per_s", 1.12e4) == "11.2 k samples/s"
    assert human_column("data_wait_frac", 0.67) == "67.0%"


def test_a_damaged_cell_is_refused_naming_file_and_line(tmp_path):
    path = tmp_path / "bad.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, restval="")
        writer.writeheader()
        writer.writerow(
            {
                "schema_version": SCHEMA_VERSION,
                "run_id": "r",
                "workload": "matmul",
                "case_id": "a",
                "rounds": "seven",
                "status": "ok",
            }
        )
    with pytest.raises(SchemaError, match=r"bad.csv: line 2: column rounds holds 'seven'"):
        read_rows(path)


def test_a_row_cut_inside_a_quoted_field_is_never_data(tmp_path):
    writer = ResultsWriter(tmp_path, "cut")
    writer.append(row("a", reason="one; two, three"))
    writer.close()
    text = (tmp_path / "cut.csv").read_text()
    # the reason's quotes never close
    (tmp_path / "cut.csv").write_text(text[: text.index("one; two") + 4])
    with pytest.raises(SchemaError, match="line 2 is truncated"):
        read_rows(tmp_path / "cut.csv")


def test_a_version_3_file_reads_as_the_current_version_with_no_build_costs():
    """Version 4 only added what each build cost (build_s, first_call_s): a version-3 file reads
    with them empty, so a budget finds no history in it rather than a wrong one."""
    path = REPO / "reports/examples/cpu-2core-quick.csv"
    # really a version-3 file
    assert path.read_text().splitlines()[1].startswith("3,")
    rows = read_rows(path)
    assert rows and all(r["schema_version"] == SCHEMA_VERSION == 6 for r in rows)
    assert all(r["build_s"] is None and r["first_call_s"] is None for r in rows)


def test_an_epoch_from_before_the_epoch_race_reads_as_not_raced_and_keeps_its_label():
    """An epoch row of version 3 has no `raced`: it was not raced (the race came later), so the
    guide's template epoch is still labelled the template in a report, not by its loader, and its
    template figures stay."""
    from gpubench.reports.judge.load import load_results

    rows = read_rows(REPO / "reports/examples/cpu-2core-quick.csv")
    epochs = [r for r in rows if r["workload"] == "mnist_epoch"]
    assert epochs and all(r["raced"] is False for r in epochs)
    # a setting the case does not have
    assert all(r["raced"] is None for r in rows if r["workload"] == "matmul")
    frame = load_results([REPO / "reports/examples/cpu-2core-quick.csv"])
    assert "guide-template" in set(frame.loc[frame["workload"] == "mnist_epoch", "setting"])


@pytest.mark.parametrize(
    "name", ["tests/v1/cpu-2core-quick.csv", "reports/examples/h200-quick.csv"]
)
def test_version_1_example_files_are_upgraded_on_read(name):
    """Version-1 files as the first release wrote them (the CPU example of that release, the
    committed H200 example): read as the current version, case ids rebuilt by the one id scheme,
    settings a case does not use emptied (a preloaded epoch has no DataLoader knobs)."""
    path = REPO / name
    # really a version-1 file
    assert path.read_text().splitlines()[1].startswith("1,")
    rows = read_rows(path)
    assert rows and all(
        r["schema_version"] == SCHEMA_VERSION and r["build"] == 0 and r["builds"] == 1 for r in rows
    )
    ids = {r["case_id"] for r in rows}
    assert (
        "mnist_epoch/guide-template" in ids
        and "mnist_epoch/preloaded" in ids
        and "matmul/fp32-n1024" in ids
    )
    preloaded = next(r for r in rows if r["case_id"] == "mnist_epoch/preloaded")
    assert (
        preloaded["num_workers"] is None
        and preloaded["pin_memory"] is None
        and preloaded["loader"] == "preloaded"
    )
    assert max(len(i) for i in ids) <= 60


def test_two_runs_never_share_a_file(tmp_path):
    ResultsWriter(tmp_path, "same").close()
    with pytest.raises(FileExistsError):
        ResultsWriter(tmp_path, "same")
    assert new_run_id() != new_run_id()


@pytest.mark.process
def test_killed_run_keeps_every_finished_case(tmp_path):
    script = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from gpubench.harness.records.results import ResultsWriter
        writer = ResultsWriter(Path({str(tmp_path)!r}), "killed")
        for i in range(3):
            writer.append({{"schema_version": {SCHEMA_VERSION}, "run_id": "killed",
                           "case_id": f"case{{i}}", "status": "ok"}})
        os.kill(os.getpid(), signal.SIGKILL)  # no close, no flush at exit
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert done.returncode != 0
    rows = read_rows(tmp_path / "killed.csv")
    assert [r["case_id"] for r in rows] == ["case0", "case1", "case2"]


def test_unknown_column_is_an_internal_error(tmp_path):
    writer = ResultsWriter(tmp_path, "x")
    with pytest.raises(AssertionError, match="not_a_column"):
        writer.append({"not_a_column": 1})


def test_newer_schema_is_refused_with_an_instruction(tmp_path):
    path = tmp_path / "new.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, restval="")
        writer.writeheader()
        writer.writerow({"schema_version": SCHEMA_VERSION + 1, "case_id": "a"})
    with pytest.raises(SchemaError, match="upgrade gpubench"):
        read_rows(path)


def test_a_version_4_file_reads_as_the_current_version_with_the_unreached_columns_empty(tmp_path):
    """Version 5 only added the `unreached` status and its columns: a version-4 row reads with them
    empty, and its settings as written (a version-4 epoch row was raced or not as it says: nothing
    is filled in)."""
    path = tmp_path / "v4.csv"
    added = ("training_s", "epochs_trained", "stopped_by", "llc_total_bytes")
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(
            handle, fieldnames=[c for c in COLUMNS if c not in added], restval=""
        )
        writer.writeheader()
        writer.writerow(
            {
                "schema_version": 4,
                "run_id": "r",
                "timestamp_utc": "2026-11-29T00:00:00+00:00",
                "machine_id": "m",
                "hostname": "h",
                "device": "cpu",
                "device_name": "cpu",
                "torch_version": "2.0",
                "workload": "time_to_accuracy",
                "case_id": "time_to_accuracy/template",
                "status": "failed",
                "reason": "did not converge",
            }
        )
    (got,) = read_rows(path)
    assert got["schema_version"] == SCHEMA_VERSION == 6 and got["raced"] is None
    assert all(got[column] is None for column in added)


def test_not_a_results_file(tmp_path):
    path = tmp_path / "other.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(SchemaError, match="not a gpubench results file"):
        read_rows(path)


def test_unwritable_results_dir_names_the_fix(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OSError, match="--results-dir"):
        check_writable(blocker / "sub")


# ---- one reader: each column's rules, one cell or a whole column at once, and the harness and the
# report alike ----


class No(str):
    """A refused cell's message: the file is damaged."""


class Impossible(No):
    """A refused cell's message: a value no measurement gives (its row is refused, not its file)."""


LONGEST = "above 1e+06 s: no timed region lasts 11 days"
SHORTEST = "below 1e-09 s: no timed region is shorter than a nanosecond"
STAMP = "not an ISO 8601 timestamp with its offset, as 2026-11-29T12:00:00+00:00"
# column: (cell, what it reads as: a value, None when empty, or the message it is refused with)
CELLS = {
    "pinned": [
        ("True", True),
        ("False", False),
        ("TRUE", True),
        (" yes ", True),
        ("No", False),
        ("0", False),
        ("1", True),
        ("tRuE", True),
        ("maybe", No("not a boolean: 'maybe'")),
        ("2", No("not a boolean: '2'")),
        ("", None),
    ],
    "rounds": [
        ("7", 7),
        ("7.0", 7),
        ("1e3", 1000),
        (" 7 ", 7),
        ("+3", 3),
        ("-1", Impossible("negative")),
        ("1.5", No("not an integer: '1.5'")),
        ("0.5", No("not an integer: '0.5'")),
        ("inf", Impossible("not a finite number")),
        ("nan", Impossible("not a finite number")),
        ("1_000", No("not a number: '1_000'")),
        ("0x10", No("not a number: '0x10'")),
        ("1e400", No("not an integer: '1e400'")),
        ("\u0661\u0662", No("not a number: '\u0661\u0662'")),
        ("", None),
        ("seven", No("not a number: 'seven'")),
    ],
    "median_s": [
        ("0.1", 0.1),
        ("5.", 5.0),
        (".5", 0.5),
        ("1E5", 1e5),
        ("7", 7.0),
        ("1e-9", 1e-9),
        ("1e6", 1e6),
        ("-0", Impossible(SHORTEST)),
        ("2e-10", Impossible(SHORTEST)),
        ("1e-400", Impossible(SHORTEST)),
        ("1e7", Impossible(LONGEST)),
        ("-0.5", Impossible("negative")),
        ("inf", Impossible("not a finite number")),
        ("-inf", Impossible("not a finite number")),
        ("nan", Impossible("not a finite number")),
        ("infinity", Impossible("not a finite number")),
        ("1e400", Impossible("not a finite number")),
        ("abc", No("not a number: 'abc'")),
        ("", None),
    ],
    "iqr_s": [
        ("0", 0.0),
        ("2e-10", 2e-10),
        ("-1", Impossible("negative")),
        ("1e7", Impossible(LONGEST)),
    ],
    "test_accuracy": [
        ("0.5", 0.5),
        ("0", 0.0),
        ("1", 1.0),
        ("1.5", Impossible("outside [0, 1]")),
        ("-1", Impossible("outside [0, 1]")),
        ("", None),
    ],
    "tflops": [("0", 0.0), ("-5", Impossible("negative"))],
    "lr": [
        ("-0.5", -0.5),
        ("0.001", 0.001),
        ("Infinity", Impossible("not a finite number")),
        ("1e400", Impossible("not a finite number")),
    ],
    # net of idle power: may be negative
    "energy_j": [("-2.5", -2.5)],
    "samples_s": [
        ("[1, 2]", [1.0, 2.0]),
        ("[]", []),
        ("[1e-9, 1e6]", [1e-9, 1e6]),
        ("[-1]", Impossible("a sample that is not a non-negative duration")),
        ("[NaN]", Impossible("a sample that is not a non-negative duration")),
        ('["inf"]', Impossible("a sample that is not a non-negative duration")),
        ("[1" + "0" * 400 + "]", Impossible("a sample that is not a non-negative duration")),
        ("[0]", Impossible(SHORTEST)),
        ("[1e-3, 2e6]", Impossible(LONGEST)),
        ("[0, 2e6]", Impossible(LONGEST)),
        ("[1,", No("Expecting value: line 1 column 4 (char 3)")),
        ("hello", No("Expecting value: line 1 column 1 (char 0)")),
        ("{}", No("not a JSON list")),
        ("[[1]]", No("not a flat JSON list of numbers")),
        ("", None),
    ],
    "user_figures": [
        ('{"loss": 0.5}', {"loss": 0.5}),
        ('{"loss": true}', No("a figure that is not a number")),
        ('{"loss": NaN}', Impossible("NaN is not a finite number")),
    ],
    "status": [
        ("ok", "ok"),
        ("oom", "oom"),
        ("weird", No("not one of ok, skipped, unreached, failed, oom")),
        ("", No("empty")),
    ],
    "case_id": [("matmul/n8", "matmul/n8"), ("", No("empty"))],
    "timestamp_utc": [
        ("2026-11-29T00:00:00+00:00", "2026-11-29T00:00:00+00:00"),
        ("yesterday", No(STAMP)),
        ("2026-13-45T99:00:00", No(STAMP)),
        ("2026-11-29T00:00:00", No(STAMP)),
        (
            "1969-12-31T00:00:00+00:00",
            Impossible("year 1969, outside 1970 to 2100: a broken clock or an edited file"),
        ),
        ("", None),
    ],
    "hostname": [("box", "box"), ("", None)],
    "a_newer_writers_column": [("anything", "anything"), ("", None)],
}


@pytest.mark.parametrize("column", CELLS)
def test_one_cell_reads_as_its_columns_rules_say(column):
    from gpubench.harness.records.schema import ImpossibleValue, parse_cell

    for cell, expected in CELLS[column]:
        if not isinstance(expected, No):
            assert parse_cell(column, cell) == expected, (column, cell)
            continue
        with pytest.raises(ValueError) as refused:
            parse_cell(column, cell)
        assert str(refused.value) == expected, (column, cell)
        assert isinstance(refused.value, ImpossibleValue) == isinstance(expected, Impossible), (
            column,
            cell,
        )


def test_whole_columns_read_as_their_rules_say_each_number_by_its_own_column_in_one_block():
    """read_frame's bulk path: every number column of a file as one block (each cell judged by its
    own column's rules there), every other column at once; refused where a cell alone is, read to
    the same value elsewhere."""
    import pandas as pd

    from gpubench.harness.records.results_reader import parse_column, parse_numbers
    from gpubench.harness.records.schema import kind_of

    numbers = [c for c in CELLS if kind_of(c) in ("int", "float")]
    depth = max(len(CELLS[c]) for c in numbers)
    cells = {c: [cell for cell, _ in CELLS[c]] + [""] * (depth - len(CELLS[c])) for c in numbers}
    block, refused_in_block = parse_numbers(pd.DataFrame(cells, dtype=object))
    for column in CELLS:
        if column in numbers:
            at = numbers.index(column)
            values, refused = block[column].tolist(), refused_in_block[:, at].tolist()
        else:
            read, mask = parse_column(
                column, pd.Series([cell for cell, _ in CELLS[column]], dtype=object)
            )
            values, refused = read.tolist(), mask.tolist()
        for (cell, expected), value, no in zip(CELLS[column], values, refused):
            assert no == isinstance(expected, No), (column, cell)
            # numbers as floats, NaN when empty; samples and objects as their text, None when empty
            if not no:
                shown = cell or None if kind_of(column) in ("json", "object") else expected
                assert (None if value is None or value != value else value) == shown, (column, cell)


def test_numbers_are_read_exactly():
    import random

    import pandas as pd

    from gpubench.harness.records.results_reader import parse_numbers

    xs = [
        random.Random(seed).uniform(-1, 1) * 10 ** random.Random(seed).randint(-300, 300)
        for seed in range(2000)
    ]
    values, refused = parse_numbers(pd.DataFrame({"lr": [repr(x) for x in xs]}, dtype=object))
    assert not refused.any() and values["lr"].tolist() == xs


def _tricky(tmp_path, name):
    """One of the tricky files both readers must agree on; returns its path."""
    base = {
        "schema_version": str(SCHEMA_VERSION),
        "run_id": "r",
        "timestamp_utc": "2026-11-29T00:00:00+00:00",
        "machine_id": "m",
        "hostname": "h",
        "device": "cpu",
        "device_name": "cpu",
        "torch_version": "2.5",
        "workload": "matmul",
        "case_id": "matmul/fp32-n64",
        "build": "0",
        "dtype": "fp32",
        "size": "64",
        "rounds": "3",
        "median_s": "0.001",
        "status": "ok",
        "samples_s": "[0.001, 0.002]",
    }
    cells = {
        "bools": {
            "pinned": "TRUE",
            "non_blocking": "yes",
            "tf32_matmul": "0",
            "input_bound": " No ",
        },
        "bad-bool": {"pinned": "maybe"},
        "inf": {"median_s": "inf"},
        "nan": {"min_s": "nan"},
        "huge": {"mean_s": "1e400"},
        "int-inf": {"rounds": "inf"},
        "negative-seconds": {"median_s": "-0.5"},
        "negative-zero": {"min_s": "-0"},
        "exponent-int": {"rounds": "1e3"},
        "underscore": {"rounds": "1_000"},
        "spaces": {"rounds": " 7 "},
        "v2-bools": {"schema_version": "2", "pinned": "TRUE"},
        "newer": {"schema_version": str(SCHEMA_VERSION + 1)},
        "no-version": {"schema_version": "x"},
    }.get(name, {})
    path = tmp_path / f"{name}.csv"
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, restval="")
        writer.writeheader()
        writer.writerows([base, dict(base, **cells)])
    text = path.read_text(encoding="utf-8")
    edits = {
        "bom": lambda t: "\ufeff" + t,
        "blank-line": lambda t: t + "\r\n",
        "blank-lines": lambda t: t + "\n\n",
        "cut-last-line": lambda t: t[: t.rindex("0.002")],
        "cut-mid-row": lambda t: t[: t.rindex(",matmul,") + 2] + "\n",
        "extra-field": lambda t: t.rstrip("\r\n") + ",surplus\r\n",
        "not-results": lambda t: "a,b\n1,2\n",
    }
    path.write_text(edits.get(name, lambda t: t)(text), encoding="utf-8", newline="")
    return path


TRICKY = [
    "plain",
    "bools",
    "bad-bool",
    "bom",
    "blank-line",
    "blank-lines",
    "cut-last-line",
    "cut-mid-row",
    "extra-field",
    "inf",
    "nan",
    "huge",
    "int-inf",
    "negative-seconds",
    "negative-zero",
    "exponent-int",
    "underscore",
    "spaces",
    "v2-bools",
    "newer",
    "no-version",
    "not-results",
]


def _plain(value):
    """A value as both readers' callers see it, empty as None (the report reads empty flags as
    "")."""
    if value is None or value == "" or (isinstance(value, float) and value != value):
        return None
    return (
        float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
    )


@pytest.mark.parametrize("name", TRICKY)
def test_the_harness_and_the_report_accept_and_refuse_the_same_files(tmp_path, name):
    """read_rows (the harness) and gpubench.reports.judge.load.load_results (gpubench report)
    read one file alike: both refuse it naming the file, or both read the same values."""
    import json

    from gpubench.reports.judge.load import load_results

    path = _tricky(tmp_path, name)
    try:
        rows, harness_error = read_rows(path), None
    except SchemaError as error:
        rows, harness_error = None, str(error)
    try:
        frame, report_error = load_results([path]), None
    except UsageError as error:
        frame, report_error = None, str(error)
    assert harness_error == report_error, name
    if harness_error:
        assert str(path) in harness_error and len(harness_error.splitlines()) == 1
        return
    assert len(rows) == len(frame) == 2
    for row, (_, loaded) in zip(rows, frame.iterrows()):
        for column in COLUMNS:
            value = (
                json.loads(loaded[column])
                if column == "samples_s" and loaded[column]
                else loaded[column]
            )
            assert _plain(row[column]) == _plain(value), (name, column)


def test_the_tricky_files_read_as_written(tmp_path):
    (plain, bools) = read_rows(_tricky(tmp_path, "bools"))
    assert (bools["pinned"], bools["non_blocking"], bools["tf32_matmul"], bools["input_bound"]) == (
        True,
        True,
        False,
        False,
    )
    assert (
        plain["pinned"] is None
        and plain["samples_s"] == [0.001, 0.002]
        and plain["size"] == 64
        and isinstance(plain["size"], int)
    )
    assert read_rows(_tricky(tmp_path, "exponent-int"))[1]["rounds"] == 1000
    assert [r["case_id"] for r in read_rows(_tricky(tmp_path, "blank-lines"))] == [
        "matmul/fp32-n64"
    ] * 2
    for name, message in (
        ("cut-last-line", "line 3 is truncated"),
        ("cut-mid-row", "line 3 is truncated"),
        ("extra-field", f"line 3 has {len(COLUMNS) + 1} fields, the header {len(COLUMNS)}"),
        ("underscore", "line 3: column rounds holds '1_000' (not a number"),
        ("negative-seconds", "line 3: column median_s holds '-0.5' (negative)"),
        ("newer", "upgrade gpubench"),
        ("bad-bool", "column pinned holds 'maybe' (not a boolean"),
    ):
        with pytest.raises(SchemaError, match=re.escape(message)):
            read_rows(_tricky(tmp_path, name))


def test_merged_csv_is_written_from_the_frame_under_one_header(tmp_path):
    """Files with different headers (another column order, fewer columns, a newer writer's extra
    column) merge under the union of their columns: no file's values are blanked, and merged.csv
    reads back to the frame it was written from."""
    from pathlib import Path

    from gpubench.harness.records.results_reader import frame_rows
    from gpubench.reports.judge.load import load_results, write_merged

    full = _tricky(tmp_path, "bools")
    with open(full, newline="", encoding="utf-8") as handle:
        header, *rows = list(csv.reader(handle))[:2]
    # reordered, two columns fewer
    keep = [c for c in reversed(header) if c not in ("pinned", "energy_j")]
    with open(tmp_path / "a.csv", "w", newline="") as handle:
        csv.writer(handle).writerows([keep, *([r[header.index(c)] for c in keep] for r in rows)])
    with open(tmp_path / "b.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[*COLUMNS, "from_a_newer_writer"], restval="")
        writer.writeheader()
        writer.writerow(
            dict(
                zip(header, rows[0]),
                pinned="True",
                energy_j="5.5",
                from_a_newer_writer="kept",
                case_id="matmul/b",
            )
        )
    frame = load_results([tmp_path / "a.csv", tmp_path / "b.csv"])
    write_merged(frame, tmp_path / "merged.csv")
    with open(tmp_path / "merged.csv", newline="") as handle:
        merged = list(csv.DictReader(handle))
    assert list(merged[0]) == [*COLUMNS, "from_a_newer_writer"]
    assert [
        (r["case_id"], r["pinned"], r["energy_j"], r["from_a_newer_writer"]) for r in merged
    ] == [("matmul/fp32-n64", "", "", ""), ("matmul/b", "True", "5.5", "kept")]
    for loaded, out in (
        (frame, tmp_path / "merged.csv"),
        (load_results([Path(__file__).parent / "data"]), tmp_path / "golden.csv"),
    ):
        write_merged(loaded, out)
        sources = ["source_file", "source_path", "source_line"]
        assert frame_rows(load_results([out]).drop(columns=sources)) == frame_rows(
            loaded.drop(columns=sources)
        )


# ---- a full results disk --------------------------------------------------------------------


def quoted_row(case_id: str, **extra):
    """A row whose reason needs CSV quoting."""
    return row(case_id, **{"reason": "a, quoted; reason", **extra})


def full_disk_after_half(monkeypatch) -> None:
    """Every os.write puts half its bytes on disk, then fails as a full disk does."""
    real_write = os.write

    def write(fd: int, data) -> int:
        real_write(fd, bytes(data[: max(1, len(data) // 2)]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", write)


@pytest.mark.parametrize("failing", ["write", "fsync"])
def test_a_full_disk_leaves_only_whole_rows_and_says_how_many(tmp_path, monkeypatch, failing):
    writer = ResultsWriter(tmp_path, "full")
    writer.append(quoted_row("a"))
    writer.append(quoted_row("b"))
    if failing == "write":
        full_disk_after_half(monkeypatch)
    # the data reached the page cache; the disk refuses it at fsync (delayed allocation, NFS)
    else:
        monkeypatch.setattr(
            os,
            "fsync",
            lambda fd: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space left on device")),
        )
    with pytest.raises(ResultsFull) as caught:
        writer.append(quoted_row("c", reason="x" * 5000))
    monkeypatch.undo()
    message = str(caught.value)
    assert (
        message.startswith(f"results folder full: 2 rows kept in {tmp_path / 'full.csv'}")
        and "\n" not in message
    )
    assert (
        "--results-dir" in message
        and caught.value.errno == errno.ENOSPC
        and isinstance(caught.value, OSError)
    )
    # no cut third row
    assert [r["case_id"] for r in read_rows(tmp_path / "full.csv")] == ["a", "b"]
    # space freed: the run's file goes on whole
    writer.append(quoted_row("d"))
    writer.close()
    assert [r["case_id"] for r in read_rows(tmp_path / "full.csv")] == ["a", "b", "d"]


def test_a_later_build_process_counts_the_rows_already_in_the_file(tmp_path, monkeypatch):
    first = ResultsWriter(tmp_path, "run")
    first.append(quoted_row("a"))
    first.append(quoted_row("b"))
    first.close()
    later = ResultsWriter(tmp_path, "run", resume=True)
    full_disk_after_half(monkeypatch)
    with pytest.raises(ResultsFull, match="results folder full: 2 rows kept in"):
        later.append(quoted_row("c"))
    monkeypatch.undo()
    later.close()
    assert [r["case_id"] for r in read_rows(tmp_path / "run.csv")] == ["a", "b"]


def test_a_disk_full_before_the_header_leaves_no_file(tmp_path, monkeypatch):
    full_disk_after_half(monkeypatch)
    with pytest.raises(ResultsFull, match="results folder full: 0 rows kept"):
        ResultsWriter(tmp_path, "empty")
    monkeypatch.undo()
    assert not (tmp_path / "empty.csv").exists()


def test_a_sidecar_is_never_half_written(tmp_path, monkeypatch):
    writer = ResultsWriter(tmp_path, "run")
    writer.append(quoted_row("a"))
    write_sidecar(tmp_path, "run", "ops", {"case": [1, 2, 3]})
    full_disk_after_half(monkeypatch)
    with pytest.raises(
        ResultsFull,
        match=r"results folder full: 1 rows kept in .*run\.csv; run\.ops\.json not written",
    ):
        write_sidecar(tmp_path, "run", "ops", {"case": list(range(10_000))})
    monkeypatch.undo()
    writer.close()
    # the previous version, whole
    assert (
        tmp_path / "run.ops.json"
    ).read_text() == '{\n  "case": [\n    1,\n    2,\n    3\n  ]\n}\n'
    # no temporary file left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.csv", "run.ops.json"]


# ---- run ids and damaged values -------------------------------------------------------------


@pytest.mark.parametrize(
    "run_id, said", [("x" * 10_000, "10000 characters"), ("\U0001f600" * 60, "240 bytes in UTF-8")]
)
def test_a_run_id_no_file_system_takes_is_refused_in_one_line_by_gpubench_run_before_any_build(
    tmp_path, capsys, run_id, said
):
    """A 10,000-character run id ended in an ENAMETOOLONG traceback after the builds; 60 emoji
    (under the character limit, 240 bytes) left a header-only CSV that then blocked the id."""
    from gpubench.harness.commands.cli import main

    assert (
        main(
            [
                "run",
                "--device",
                "cpu",
                "--profile",
                "smoke",
                "--results-dir",
                str(tmp_path / "res"),
                "--run-id",
                run_id,
            ]
        )
        == 4
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--run-id is {said}" in err and "pass another --run-id" in err
    assert not (tmp_path / "res").exists()


@pytest.mark.parametrize("run_id", ["", "a\nb"])
def test_an_empty_or_control_character_run_id_is_refused(tmp_path, run_id):
    with pytest.raises(UsageError, match="--run-id"):
        check_run_id(run_id, tmp_path)


def write_one_row(tmp_path: Path, **cells) -> Path:
    """A results file of one row written cell by cell (csv, not ResultsWriter, which refuses bad
    values)."""
    cells = dict(
        {
            "schema_version": SCHEMA_VERSION,
            "run_id": "r",
            "workload": "matmul",
            "case_id": "matmul/fp32-n64",
            "status": "ok",
            "median_s": "0.001",
            "samples_s": "[0.001, 0.001]",
        },
        **cells,
    )
    path = tmp_path / "damaged.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, restval="")
        writer.writeheader()
        writer.writerow(cells)
    return path


@pytest.mark.parametrize(
    "cells",
    [
        {"median_s": "inf"},
        {"median_s": "-1"},
        {"samples_s": "[1,2,"},
        {"samples_s": "hello"},
        {"samples_s": "[-1e-5]"},
        {"status": "weird"},
        {"case_id": ""},
        {"size": "64.5"},
        {"build": "-3"},
        {"timestamp_utc": "yesterday"},
        {"timestamp_utc": "2026-13-45T99:00:00"},
        {"run_id": ""},
    ],
)
def test_damaged_values_are_refused_by_both_readers(tmp_path, cells):
    path = write_one_row(tmp_path, **cells)
    with pytest.raises(SchemaError, match="line 2: column"):
        read_rows(path)
    with pytest.raises(UsageError, match="line 2: column"):
        load_results([path])
