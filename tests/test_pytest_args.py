"""The one reader of the user's pytest arguments."""

from __future__ import annotations

from pathlib import Path

from gpubench.harness.core.pytest_args import (
    asks_verbose,
    first_of,
    named_test_file,
    option_names,
    option_value,
    own_options,
    plugins_disabled,
    saves_benchmarks,
    selections,
    with_tagged_json,
    without_separator,
)


def test_an_options_last_value_is_read_in_either_form() -> None:
    assert (
        option_value(["--benchmark-timer", "a.b", "--benchmark-timer=c.d"], "--benchmark-timer")
        == "c.d"
    )
    assert option_value(["--benchmark-timer-x=1"], "--benchmark-timer") is None


def test_verbosity_saving_and_own_options() -> None:
    assert asks_verbose(["-vv"]) and asks_verbose(["--verbose"]) and not asks_verbose(["-vx"])
    assert saves_benchmarks(["--benchmark-save=x"]) and not saves_benchmarks(["--benchmark-json=x"])
    assert own_options(["--gpubench-budget=1m", "--device"]) == ["--gpubench-budget"]
    assert option_names(["-k", "x", "--a=1", "--b"]) == ["--a", "--b"]


def test_a_json_output_is_tagged_per_build_in_both_forms() -> None:
    given = ["--benchmark-json", "out/x.json", "--benchmark-json=y.json"]
    assert with_tagged_json(given, "b1") == [
        "--benchmark-json",
        str(Path("out/x.b1.json")),
        "--benchmark-json=y.b1.json",
    ]
    assert with_tagged_json(given, "") == given


def test_selections_refusals_and_the_separator() -> None:
    assert selections(["-k", "matmul", "-mslow", "--keep"]) == [("-k", "matmul"), ("-m", "slow")]
    assert first_of(["-x", "-n4"], ("-n", "--numprocesses")) == "-n4"
    assert first_of(["--lf=1"], ("--lf",)) == "--lf=1"
    assert plugins_disabled(["-p", "no:benchmark", "-p", "xdist"]) == ["benchmark"]
    assert named_test_file(["-k", "x", "bench_a.py::t[c]"]) == "bench_a.py::t[c]"
    assert without_separator(["--", "-k", "x"]) == ["-k", "x"]
