"""A user's own benchmark as a case of the harness (gpubench.harness.measurement.user_bench), and
its columns in the results schema: `params` and `user_figures`, flat JSON objects that round-trip
through the CSV."""

from __future__ import annotations

import csv

import pytest

from gpubench.harness.core.stats import summarize
from gpubench.harness.measurement.user_bench import rate_figures, user_workload
from gpubench.harness.core.exits import UsageError
from gpubench.harness.records.results import ResultsWriter
from gpubench.harness.records.results_reader import read_rows
from gpubench.harness.records.schema import COLUMNS, SCHEMA_VERSION, SchemaError


def workload_of(name="mymodel/train", params=None, work=None, figures=None, builds=1):
    return user_workload(name, params, lambda: lambda: 1.5, work, figures, builds)


def test_a_case_id_names_the_case_and_its_params_in_one_order():
    case, workload = workload_of(params={"batch": 64, "amp": True})
    same, _ = workload_of(params={"amp": True, "batch": 64})
    assert case.case_id == same.case_id == "mymodel/train-amp=True-batch=64"
    assert (case.workload, case.settings(), workload.builds("quick")) == (
        "mymodel",
        {"params": {"amp": True, "batch": 64}},
        1,
    )
    assert workload_of(name="mymodel")[0].case_id == "mymodel/defaults"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            dict(name="matmul/mine"),
            "'matmul' is one of gpubench's own workloads — start the name with your own",
        ),
        (dict(name="my model"), "name 'my model': use parts of letters, digits"),
        (
            dict(params={"batch": [64]}),
            "params['batch'] = [64]: use text, a number, a boolean or None",
        ),
        (dict(params={"lr": float("nan")}), "params['lr'] = nan: use text, a number"),
        (
            dict(work={"samples": -1}),
            "work['samples'] = -1: give the positive amount one call does",
        ),
        (dict(builds=0), "builds=0: pass a whole number of builds, 1 or more"),
    ],
)
def test_a_call_the_harness_cannot_record_is_one_line_naming_the_fix(kwargs, message):
    with pytest.raises(UsageError) as error:
        workload_of(**kwargs)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_work_per_call_makes_the_throughput_figures():
    stats = summarize([0.5, 0.5, 0.5])
    figures = rate_figures({"samples": 64, "flops": 2e12, "bytes": 1e9, "tokens": 100}, stats)
    assert figures == {
        "samples_per_s": 128.0,
        "tflops": 4.0,
        "gbps": 2.0,
        "user_figures": {"tokens_per_s": 200.0},
    }


def test_the_users_figures_join_the_row_and_a_bad_one_names_itself():
    case, workload = workload_of(
        work={"tokens": 10}, figures=lambda stats, result: {"loss": result}
    )
    timed = workload.set_up(case, None)
    assert timed.figures(summarize([0.5]), 2.5) == {
        "user_figures": {"tokens_per_s": 20.0, "loss": 2.5}
    }
    with pytest.raises(UsageError, match="figure 'loss' = 'low': a figure is a finite number"):
        timed.figures(summarize([0.5]), "low")


def test_params_and_user_figures_round_trip_through_the_csv(tmp_path):
    writer = ResultsWriter(tmp_path, "r")
    writer.append(
        {
            "schema_version": 4,
            "run_id": "r",
            "workload": "mymodel",
            "case_id": "mymodel/train-batch=64",
            "status": "ok",
            "params": {"batch": 64, "amp": True, "opt": "sgd", "note": None},
            "user_figures": {"loss": 2.5, "tokens_per_s": 1e6},
        }
    )
    writer.close()
    with open(tmp_path / "r.csv", newline="") as handle:
        cells = next(csv.DictReader(handle))
    # canonical: one text per value
    assert cells["params"] == '{"amp":true,"batch":64,"note":null,"opt":"sgd"}'
    [row] = read_rows(tmp_path / "r.csv")
    assert row["params"] == {"amp": True, "batch": 64, "note": None, "opt": "sgd"}
    assert row["user_figures"] == {"loss": 2.5, "tokens_per_s": 1e6}


@pytest.mark.parametrize(
    "column, cell, why",
    [
        ("params", '{"batch": {"inner": 1}}', "not a flat JSON object"),
        ("params", "[1, 2]", "not a JSON object"),
        ("user_figures", '{"loss": "low"}', "a figure that is not a number"),
        ("user_figures", '{"loss": NaN}', "NaN is not a finite number"),
    ],
)
def test_a_damaged_object_cell_is_refused_naming_its_file_line_and_column(
    tmp_path, column, cell, why
):
    path = tmp_path / "r.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, restval="")
        writer.writeheader()
        writer.writerow(
            {
                "schema_version": 4,
                "run_id": "r",
                "workload": "mymodel",
                "case_id": "mymodel/x",
                "status": "ok",
                column: cell,
            }
        )
    with pytest.raises(SchemaError) as error:
        read_rows(path)
    assert f"line 2: column {column} holds" in str(error.value) and why in str(error.value)


def test_a_version_3_file_reads_with_empty_params(tmp_path):
    path = tmp_path / "v3.csv"
    header = [c for c in COLUMNS if c not in ("params", "user_figures")]
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header, restval="")
        writer.writeheader()
        writer.writerow(
            {
                "schema_version": 3,
                "run_id": "r",
                "workload": "matmul",
                "case_id": "matmul/fp32-n64",
                "status": "ok",
            }
        )
    [row] = read_rows(path)
    assert (row["schema_version"], row["params"], row["user_figures"]) == (
        SCHEMA_VERSION,
        None,
        None,
    )
