"""What a report reads in a folder other people write to: special files and links, numbers no
measurement gives, and names the tool itself uses. Every refusal is one line naming the file and
why; nothing outside the named folder is read; no hang, traceback or exit 1 (compare's "slower").
Runs are three builds of one case written through ResultsWriter: nothing is measured."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest

from gpubench.harness.commands.cli import main
from gpubench.harness.records.results import ResultsWriter, check_run_id
from gpubench.harness.core.exits import UsageError
from gpubench.harness.records.results_reader import read_rows
from gpubench.harness.records.safe_files import RefusedPath, json_depth, read_json, read_regular
from gpubench.harness.records.schema import SCHEMA_VERSION
from gpubench.reports.render.build import build_report
from gpubench.reports.judge.load import load_results, result_files

CASE = "matmul/fp32-n64"
MEDIANS_S = (1.0e-3, 1.1e-3, 0.9e-3)
# json's parser recurses once per level: RecursionError far below this
DEEP = "[" * 5000 + "]" * 5000


def run(
    folder: Path, run_id: str, medians_s: tuple[float, ...] = MEDIANS_S, **fields: object
) -> Path:
    """One run of one case in `folder`/`run_id`.csv, a build per median, as the harness writes
    it."""
    folder.mkdir(parents=True, exist_ok=True)
    writer = ResultsWriter(folder, run_id)
    for build, median_s in enumerate(medians_s):
        writer.append(
            {
                "schema_version": SCHEMA_VERSION,
                "run_id": run_id,
                "machine_id": "m1",
                "hostname": "node1",
                "device": "cpu",
                "device_name": "cpu",
                "timestamp_utc": "2026-11-29T12:00:00+00:00",
                "torch_version": "2.14",
                "cuda_version": "",
                "workload": "matmul",
                "case_id": CASE,
                "dtype": "fp32",
                "size": 64,
                "build": build,
                "builds": len(medians_s),
                "status": "ok",
                "rounds": 2,
                "median_s": median_s,
                "min_s": median_s,
                "mean_s": median_s,
                "iqr_s": 0.0,
                "stddev_s": 0.0,
                "tflops": 2 * 64**3 / median_s / 1e12,
                "samples_s": [median_s, median_s],
                **fields,
            }
        )
    writer.close()
    return folder / f"{run_id}.csv"


def edited(path: Path, column: str, value: str, at: int = 0) -> Path:
    """`path` with one cell (record `at`, or every record when at is None) replaced by raw text."""
    with open(path, newline="", encoding="utf-8") as handle:
        header, *records = list(csv.reader(handle))
    for index, record in enumerate(records):
        if at is None or index == at:
            record[header.index(column)] = value
    with open(path, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([header, *records])
    return path


# ---- special files and links in a store --------------------------------------------------------


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> tuple[Path, str, str]:
    """A store whose runs' sidecars are a FIFO, a link to an endless device, nested JSON; a link to
    a folder and one to a file outside it; a sparse stray just over the size limit; a run whose
    samples cell nests deeper than json can parse. Its report.md and stderr, built once."""
    tmp = tmp_path_factory.mktemp("hostile")
    store, elsewhere = tmp / "store", tmp / "elsewhere"
    run(store / "m", "good")
    # another user's results: never to be read
    run(elsewhere / "m", "outside")
    (store / "linked").symlink_to(elsewhere / "m")
    (store / "m" / "stolen.csv").symlink_to(elsewhere / "m" / "outside.csv")
    run(store / "m", "fifo")
    os.mkfifo(store / "m" / "fifo.env.json")
    os.mkfifo(store / "m" / "fifo.ops.json")
    run(store / "m", "device")
    (store / "m" / "device.env.json").symlink_to("/dev/zero")
    run(store / "m", "deep")
    (store / "m" / "deep.env.json").write_text(DEEP, encoding="utf-8")
    (store / "m" / "deep.ops.json").write_text('{"case": ' + DEEP + "}", encoding="utf-8")
    with open(store / "m" / "stray.csv", "wb") as handle:
        # sparse: no disk used
        handle.truncate(256 * 2**20 + 1)
    edited(run(store / "m", "deepcell"), "samples_s", DEEP)
    err_file = tmp / "stderr"
    with open(err_file, "w", encoding="utf-8") as err, pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stderr", err)
        text = build_report([store], tmp / "out", None).read_text(encoding="utf-8")
    return store, text.replace("\\_", "_"), err_file.read_text(encoding="utf-8")


# the fixture hung on a FIFO sidecar: a timeout turns that into a failure
@pytest.mark.timeout(120)
def test_a_fifo_sidecar_is_left_out_and_named_not_waited_on(hostile):
    store, text, err = hostile
    assert f"{store}/m/fifo.env.json: a FIFO, not a regular file" in err
    # good, fifo, device and deep
    assert "fifo.env.json: a FIFO" in text and "4 run(s)" in text


@pytest.mark.timeout(120)
def test_a_sidecar_linked_to_an_endless_device_is_not_followed(hostile):
    store, _, err = hostile
    assert f"{store}/m/device.env.json: a symbolic link (to /dev/zero), not followed" in err


@pytest.mark.timeout(120)
def test_links_out_of_the_store_are_named_and_never_read(hostile):
    store, text, err = hostile
    assert (
        f"{store}/linked: a link to {store.parent}/elsewhere/m, outside {store} — not followed"
        in err
    )
    assert (
        f"{store}/m/stolen.csv: a link to {store.parent}/elsewhere/m/outside.csv, outside {store}"
        in err
    )
    assert (
        "outside" not in set(load_results([store / "m" / "good.csv"])["run_id"])
        and "| outside" not in text
    )


@pytest.mark.timeout(120)
def test_a_sparse_stray_over_the_limit_is_left_out_unread(hostile):
    store, _, err = hostile
    assert f"{store}/m/stray.csv: 268,435,457 bytes, above the 256 MiB a results file may be" in err


@pytest.mark.timeout(120)
def test_deeply_nested_json_in_a_sidecar_or_a_cell_is_one_line(hostile):
    store, text, err = hostile
    assert f"{store}/m/deep.env.json: JSON nested 5000 levels deep" in err
    assert (
        "deep.ops.json is not (wholly) a profiler table: what is not was left out "
        f"({store}/m/deep.ops.json: JSON nested 5001 levels deep" in text
    )
    # that file left out, the others kept
    assert f"{store}/m/deepcell.csv: line 2: column samples_s holds '[[[[" in err


def test_a_fifo_or_device_named_directly_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "pipe.csv")
    for path in (tmp_path / "pipe.csv", Path("/dev/zero")):
        with pytest.raises(RefusedPath, match="not a regular file"):
            read_regular(path, 1024)
    with pytest.raises(UsageError, match="pipe.csv: not a regular file"):
        load_results([tmp_path / "pipe.csv"])


def test_a_sparse_file_over_the_limit_is_refused_before_a_byte_is_read(tmp_path, monkeypatch):
    with open(tmp_path / "stray.csv", "wb") as handle:
        # sparse: 2 GB on paper, nothing on disk
        handle.truncate(2 * 2**30)

    def read(*args, **kwargs):
        raise AssertionError("read before its size was checked")

    # the only way read_regular reads
    monkeypatch.setattr("gpubench.harness.records.safe_files.os.fdopen", read)
    with pytest.raises(
        RefusedPath,
        match=r"stray.csv: 2,147,483,648 bytes, above the 256 MiB a results file may be",
    ):
        read_regular(tmp_path / "stray.csv", 256 * 2**20, "results file")


def test_json_depth_skips_brackets_inside_strings(tmp_path):
    assert json_depth('{"a": [1, {"b": "[[[\\" [["}]}') == 3 and json_depth("3") == 0
    (tmp_path / "x.json").write_text('{"a": ' + DEEP + "}", encoding="utf-8")
    with pytest.raises(RefusedPath, match="nested 5001 levels"):
        read_json(tmp_path / "x.json", 2**20)


def test_a_named_link_to_a_run_is_read_as_its_target(tmp_path):
    (tmp_path / "latest.csv").symlink_to(run(tmp_path / "runs", "r1"))
    assert list(load_results([tmp_path / "latest.csv"])["run_id"].unique()) == ["r1"]


def test_a_link_out_of_a_folder_refuses_compare_naming_it(tmp_path):
    run(tmp_path / "a", "r1")
    run(tmp_path / "b", "r2")
    (tmp_path / "a" / "more").symlink_to(tmp_path / "b")
    with pytest.raises(UsageError, match=r"a/more: a link to .*/b, outside .*/a — not followed"):
        load_results([tmp_path / "a"])
    # inside: its target is walked as itself, once
    (tmp_path / "a" / "loop").symlink_to(tmp_path / "a")
    assert result_files([tmp_path / "a"], []) == [tmp_path / "a" / "r1.csv"]


# ---- numbers no measurement gives ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "why"), [("1e300", "above"), ("1e-300", "below"), ("0", "below"), ("0.0", "below")]
)
def test_an_impossible_median_refuses_compare_in_one_line_not_exit_1(tmp_path, capsys, value, why):
    base = run(tmp_path, "base")
    new = edited(run(tmp_path, "new"), "median_s", value)
    assert main(["compare", str(base), str(new)]) == 2
    err = capsys.readouterr().err
    assert (
        f"new.csv: line 2: column median_s holds '{value}' ({why}" in err and err.count("\n") == 1
    )


def test_an_impossible_median_is_a_refused_row_in_a_report(tmp_path):
    edited(run(tmp_path / "runs", "r1"), "median_s", "1e-300", at=1)
    refused: list[str] = []
    frame = load_results([tmp_path / "runs"], refused)
    assert len(frame) == 2 and len(refused) == 1
    assert "r1.csv:3: column median_s = 1e-300 is impossible (below" in refused[0]


def test_a_raw_sample_out_of_range_is_refused(tmp_path):
    edited(run(tmp_path, "r1"), "samples_s", "[0.001, 1e300]")
    with pytest.raises(UsageError, match=r"column samples_s holds"):
        load_results([tmp_path / "r1.csv"])


def test_compare_of_extreme_but_possible_medians_prints_short_numbers(tmp_path, capsys):
    base = run(tmp_path, "base", (1e-9, 1e6, 1e-9))
    new = run(tmp_path, "new", (1e6, 1e-9, 1e6))
    assert main(["compare", str(base), str(new)]) in (0, 1)
    out = capsys.readouterr().out
    # no 36-digit interval bound, no 138-digit run count
    assert max(len(word) for word in out.split()) < 40


def test_compare_of_extreme_but_possible_runs_is_no_overflow(tmp_path, capsys):
    # two runs per side: judged on runs, one degree of freedom
    run(tmp_path / "base", "b1", (1e-9,) * 3)
    run(tmp_path / "base", "b2", (1e6,) * 3)
    run(tmp_path / "new", "n1", (1e-3,) * 3)
    run(tmp_path / "new", "n2", (1e-3,) * 3)
    assert main(["compare", str(tmp_path / "base"), str(tmp_path / "new")]) in (0, 1)
    out = capsys.readouterr().out
    # the bound beyond e^700 is inf
    assert "inf" in out and max(len(word) for word in out.split()) < 40


def test_a_column_named_twice_refuses_the_file(tmp_path):
    path = run(tmp_path, "r1")
    text = path.read_text(encoding="utf-8").splitlines()
    text = [line + ("," + ("median_s" if n == 0 else "5.0")) for n, line in enumerate(text)]
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    with pytest.raises(
        UsageError, match=r"r1.csv: the header names column median_s twice .* — the file is damaged"
    ):
        load_results([path])


@pytest.mark.parametrize(
    "stamp", ["0001-01-01T00:00:00+00:00", "9999-12-31T00:00:00+00:00", "1969-12-31T23:59:59+00:00"]
)
def test_a_timestamp_out_of_range_is_refused(tmp_path, stamp):
    edited(run(tmp_path, "r1"), "timestamp_utc", stamp, at=None)
    with pytest.raises(UsageError, match=r"column timestamp_utc holds .*outside 1970 to 2100"):
        load_results([tmp_path / "r1.csv"])


def test_a_year_one_run_leaves_the_history_plot_whole(tmp_path):
    run(tmp_path / "runs", "r1")
    edited(run(tmp_path / "runs", "r2"), "timestamp_utc", "0001-01-01T00:00:00+00:00", at=None)
    run(tmp_path / "runs", "r3", timestamp_utc="2026-11-30T12:00:00+00:00")
    text = build_report([tmp_path / "runs"], tmp_path / "out", None).read_text(encoding="utf-8")
    # r1 and r3 make the history
    assert "3 row(s) refused as impossible" in text and "| 2 |" in text


# ---- names the tool itself uses
# --------------------------------------------------------------------


@pytest.mark.parametrize("run_id", ["merged", "MERGED"])
def test_a_run_id_the_report_writes_is_refused_at_write_time(tmp_path, run_id):
    with pytest.raises(
        UsageError, match=r"--run-id .* is the name of the report's merged.csv .* — pass another"
    ):
        check_run_id(run_id, tmp_path)


def test_a_run_file_named_merged_is_read_unless_a_report_sits_beside_it(tmp_path):
    run(tmp_path / "runs", "merged")
    run(tmp_path / "runs", "r1")
    assert set(load_results([tmp_path / "runs"])["run_id"]) == {"merged", "r1"}
    (tmp_path / "runs" / "report.md").write_text("# gpubench report\n", encoding="utf-8")
    assert set(load_results([tmp_path / "runs"])["run_id"]) == {"r1"}


def test_a_later_build_already_in_the_file_is_refused_before_appending(tmp_path):
    # builds 0 and 1
    run(tmp_path, "r1", MEDIANS_S[:2])
    assert check_run_id("r1", tmp_path, appending=True, build=2) == "r1"
    with pytest.raises(
        UsageError,
        match=r"r1.csv already holds build 1 \(1 rows\): each build of a run is measured",
    ):
        check_run_id("r1", tmp_path, appending=True, build=1)
    assert len(read_rows(tmp_path / "r1.csv")) == 2


@pytest.mark.parametrize("cell", ["inf", "-inf", "nan", "1e400", "x"])
def test_a_build_cell_that_is_no_whole_number_counts_as_no_build_not_a_traceback(tmp_path, cell):
    (tmp_path / "r1.csv").write_text(f"case_id,build\nm,{cell}\nm,1\n", encoding="utf-8")
    with pytest.raises(UsageError, match=r"r1.csv already holds build 1 \(1 rows\)"):
        check_run_id("r1", tmp_path, appending=True, build=1)


@pytest.mark.parametrize(
    "make, said",
    [
        (lambda text: b"", "empty — it holds no rows"),
        (
            lambda text: __import__("gzip").compress(text),
            "not a CSV but a gzip file — gunzip it first",
        ),
        (lambda text: text.replace(b"\n", b"\r"), "its lines end in CR alone — convert them to LF"),
    ],
    ids=["empty", "gzip", "cr-only"],
)
def test_files_other_tools_hand_back_are_named_for_what_they_are(tmp_path, make, said):
    """A results file another tool packed, emptied or saved with old Mac line ends: said for what it
    is, where the reader called it undecodable, a file without columns, or one long line 'truncated
    — delete the line'."""
    from gpubench.harness.records.schema import SchemaError

    golden = Path(__file__).resolve().parent / "data" / "golden_laptop.csv"
    path = tmp_path / "r.csv"
    path.write_bytes(make(golden.read_bytes()))
    with pytest.raises(SchemaError, match=said):
        read_rows(path)
