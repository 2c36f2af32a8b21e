"""What a lower layer says reaches the user in gpubench's words: argparse's "expected one argument"
for a negative value, pytest-benchmark's INTERNALERROR for a compare file not there and its "Not
saving anything" warning, and a build that ends while making the user's --model is named by the
factory given."""

from __future__ import annotations

import pytest
from runs import gpubench_run, one_error_line, run_bench

from gpubench.harness.commands.cli import main
from gpubench.harness.core.exits import ExitCode
from gpubench.harness.core.model_spec import ModelSpec
from gpubench.harness.core.options import RunOptions
from gpubench.harness.processes.build_runs import build_outcome, run_builds
from gpubench.harness.processes.launch import Completed, Job
from gpubench.harness.processes.protocol import BuildPlan

pytest_plugins = ["pytester"]


@pytest.mark.parametrize(
    "argv, code, said",
    [
        (["run", "--budget", "-5s"], 4, "--budget '-5s': use a duration such as 90s"),
        (
            ["compare", "a.csv", "b.csv", "--threshold", "-5%"],
            2,
            "--threshold '-5%': use a percentage",
        ),
        (["ab", "--threshold", "-5%"], 4, "--threshold '-5%': use a percentage"),
    ],
    ids=["run-budget", "compare-threshold", "ab-threshold"],
)
def test_a_negative_value_reaches_its_options_own_refusal(capsys, argv, code, said):
    assert main(argv) == code
    err = capsys.readouterr().err
    assert said in err and "expected one argument" not in err and err.count("\n") == 1, err


def test_a_compare_file_not_there_is_one_line_not_an_internal_error(one_case, tmp_path):
    for given in (str(tmp_path / "nowhere" / "missing.json"), "missing.json"):
        line = one_error_line(run_bench(one_case, f"--benchmark-compare={given}"))
        assert f"--benchmark-compare {given}: no such file" in line


# the warning showed on a build's stderr, outside pytest's capture
@pytest.mark.process
def test_a_run_that_measures_nothing_says_so_once_in_its_own_words(tmp_path):
    # a whole epoch on a CPU never fits 5 s, whatever the CPU (a 64x64 matmul does on a fast one)
    proc = gpubench_run(
        tmp_path,
        *("-k", "mnist_epoch and guide-template", "--profile", "quick"),
        *("--budget", "5s", "--no-report"),
    )
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == ExitCode.NOTHING_MEASURED, out[-2000:] + err[-2000:]
    assert "Not saving anything" not in out + err and err.count("nothing was measured") == 1, err


class Dies:
    """A launcher whose build ends with `code`, having answered nothing (it died making the
    model)."""

    def __init__(self, code: int, cut: str = "") -> None:
        self.code, self.cut = code, cut

    def run(self, job: Job) -> Completed:
        return Completed(self.code, cut=self.cut)


def model_job(build: int, builds: int | None) -> Job:
    spec = ModelSpec("os", "abort", (3,))
    return Job(["build"], plan=BuildPlan(build, [], [], RunOptions(model=spec)))


def test_a_build_the_model_factory_aborts_names_the_factory():
    outcome = run_builds(Dies(-6), model_job, (2, 3, 4))
    assert (
        outcome.code == 134 and "--model os:abort" in outcome.died and "SIGABRT" in outcome.died
    ), outcome.died


def test_a_build_cut_from_outside_while_making_the_model_names_the_factory():
    outcome = run_builds(
        Dies(-9, cut="did not end within the run's 30 s budget"), model_job, (2, 3, 4)
    )
    assert "(in --model os:abort: the factory" in outcome.cut, outcome.cut
    plain = build_outcome(Completed(-9, cut="did not end"), 0, "build 1 of 1", 1, (2, 3, 4))
    assert "--model" not in plain.cut and "before collecting its cases" in plain.cut


class CutBenchmark:
    """pytest-benchmark's fixture whose rounds the budget cuts: pedantic marks only an Exception as
    an error."""

    has_error = False

    def pedantic(self, fn, **kwargs):
        from gpubench.harness.budget.clock import DeadlinePassed

        raise DeadlinePassed("did not end within the run's 8.0 s budget")


def test_rounds_cut_past_the_budget_leave_pytest_benchmark_no_empty_stats():
    from gpubench.harness.core.plan import RoundPlan
    from gpubench.harness.budget.clock import DeadlinePassed
    from gpubench.harness.pytest_plugin.fixture import benchmark_rounds

    benchmark = CutBenchmark()
    with pytest.raises(DeadlinePassed):
        benchmark_rounds(benchmark)(
            lambda: None, RoundPlan(warmup_calls=0, iterations=1, rounds=3, estimate_s=0.1)
        )
    # not in pytest-benchmark's table, JSON or compare: min() of no sample
    assert benchmark.has_error


def test_a_fleet_names_the_runs_own_line_for_a_refusal_its_build_made():
    from gpubench.harness.commands.fleet import exited

    line = "--threads 0: use 1 to 64 — pass --threads within the machine's cores"
    assert exited(4, f"gpubench: device cpu\nERROR: {line}\n") == f"gpubench run exited 4 ({line})"
