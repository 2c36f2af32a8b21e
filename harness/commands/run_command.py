"""`gpubench run`: one pytest process per build of the suite, one pytest-benchmark table, then a report."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpubench.harness.commands.common import (
    BENCHES, add_tests_argument, asks_verbose, count_rows_safely, fail, no_cases_line, report_after_run, resolve_store,
    suite_options, tests_problem,
)
from gpubench.harness.core.exits import BUILD_INTERRUPTED, BUILD_STOPS, NO_CASES_LINE, SIGNAL_BASE, ExitCode, UsageError
from gpubench.harness.processes.cpu_readings import CpuWatch
from gpubench.harness.processes.protocol import BuildPlan

if TYPE_CHECKING:
    from gpubench.harness.processes.launch import ProcessLauncher

PASSES_PYTEST_ARGS = True


def setup_arguments(sub: argparse._SubParsersAction) -> None:
    from gpubench.harness.core.options import add_to_parser

    run = sub.add_parser("run", help="run the benchmark suite (pytest benches --benchmark-only), then write a report",
                         description="Runs the suite through pytest-benchmark, one process per build. Arguments "
                                     "gpubench does not know are passed to pytest (e.g. -k matmul, --benchmark-json "
                                     "out.json).")
    add_to_parser(run)
    add_tests_argument(run)
    run.add_argument("--no-report", action="store_true", help="skip the report after the run")
    run.add_argument("--no-fork", action="store_true",
                     help="start each build as a fresh interpreter (about 2.5 s of imports each) "
                          "instead of forking it from a process that imported torch once")


def run_from_args(args: argparse.Namespace, extra: list[str]) -> int:
    if problem := tests_problem(args) or resolve_store(args) or model_problem(args) or selection_problem(extra):
        return fail(problem, code=ExitCode.REFUSED)
    try:
        wait_for_quiet(args)
    except UsageError as error:
        return fail(str(error), code=ExitCode.REFUSED)
    before = run_csv(args)
    theirs = before is not None and before.exists()  # an id another run holds: refused, and its record is not ours
    code = cmd_run(args, extra)
    if not theirs:
        record_exit(args, code)
    return code


def wait_for_quiet(args: argparse.Namespace) -> None:
    """--wait-quiet: the wait happens here, before the run's budget starts, and the builds then measure at once."""
    from gpubench.harness.core.run_budget import parse_duration

    wait_s = parse_duration(getattr(args, "wait_quiet", None), "--wait-quiet")
    args.wait_quiet = None
    if wait_s is None:
        return
    from gpubench.harness.devices.device import resolve_device  # torch, only when asked to wait
    from gpubench.harness.devices.machine_load import wait_quiet

    device = resolve_device("cuda" if args.device == "cuda:all" else args.device)
    wait_quiet(device, wait_s, lambda line: print(line, flush=True))


def run_csv(args: argparse.Namespace) -> Path | None:
    """The run's CSV, where its run id is a valid file name (a refused one has no file of its own)."""
    from gpubench.harness.records.results import check_run_id_text

    try:
        return Path(args.results_dir) / f"{check_run_id_text(args.run_id or '')}.csv"
    except UsageError:
        return None


def record_exit(args: argparse.Namespace, code: int) -> None:
    """The run's exit code beside its rows (gpubench.harness.records.store.write_exit)."""
    from gpubench.harness.records.store import write_exit

    csv_path = run_csv(args)
    if csv_path is not None and (problem := write_exit(csv_path.parent, csv_path.stem, code)):
        print(f"gpubench: {problem}", file=sys.stderr, flush=True)


def selection_problem(extra: list[str]) -> str | None:
    """A -k or -m pytest cannot read, said before any build (not inside one, beside a warning and an empty results
    folder). pytest's expression parser is internal: where it moved, pytest says it itself."""
    try:
        from _pytest.mark.expression import Expression
    except ImportError:
        return None
    pairs = zip(extra, [*extra[1:], ""])
    for flag, expression in ((a[:2], a[2:] or b) for a, b in pairs if a[:2] in ("-k", "-m") and not a.startswith("--")):
        try:
            Expression.compile(expression)
        except Exception as error:  # noqa: BLE001 - SyntaxError in pytest 9, its own ParseError before
            return f"{flag} {expression!r}: pytest cannot read it ({' '.join(str(error).split())}) — fix the expression"
    return None


def model_problem(args: argparse.Namespace) -> str | None:
    """--model and --input as text, at once (torch-free); the build processes import and try the model."""
    from gpubench.harness.core.model_spec import parse_model_options

    try:
        parse_model_options(args.model, args.input, args.input_ids)
    except UsageError as error:
        return str(error)
    return None


def build_plan(args: argparse.Namespace, extra: list[str], scratch: Path, build: int, builds: int | None,
               internal: list[str] = ()) -> BuildPlan:
    """Build k's plan: the user's pytest arguments untouched (the build tags its output files: X.json -> X.b<k>.json,
    NAME -> NAME-b<k>); pytest-benchmark's JSON in the scratch folder when the user names none, for one table."""
    return BuildPlan(build, list(extra), [*suite_options(args), *internal], builds,
                     output_tag=f"b{build}" if build else "", table_json=str(scratch / f"build-{build}.json"),
                     micro_only=bool(getattr(args, "micro_only", False)))


def build_launcher(args: argparse.Namespace) -> ProcessLauncher:
    """Builds forked from a fork server unless --no-fork; a local fleet's job stops with its fleet (killed with -9,
    nobody would read what it measures)."""
    from gpubench.harness.processes.forked import ForkLauncher
    from gpubench.harness.processes.launch import ProcessLauncher, stopped_limit_s
    from gpubench.harness.processes.lifetime import STOP_WITH_ENV

    kind = ProcessLauncher if getattr(args, "no_fork", False) else ForkLauncher
    return kind(stopped_limit_s(args.profile), os.environ.get(STOP_WITH_ENV, ""))


def run_builds(args: argparse.Namespace, extra: list[str]) -> int:
    """One pytest process per build, each dying with this one; then one pytest-benchmark table for the whole run."""
    import shutil
    import tempfile

    from gpubench.harness.commands.bench_table import print_one_table
    from gpubench.harness.commands.budget_builds import ExtraBuilds, WithinBudget, deadline_args, run_deadline_s
    from gpubench.harness.processes.build_runs import run_builds as launch_builds
    from gpubench.harness.processes.launch import Job, python_module
    from gpubench.harness.processes.lifetime import adopt_orphans, run_folder_prefix, sweep_dead_run_folders

    sweep_dead_run_folders(Path(tempfile.gettempdir()))  # left by a run killed with SIGKILL
    adopt_orphans()  # what a build leaves behind (a daemon of its own) is killed when it ends
    scratch = Path(tempfile.mkdtemp(prefix=run_folder_prefix(os.getpid())))
    deadline_s = run_deadline_s(args)  # --budget: every build process shares the run's one end
    csv_path = Path(args.results_dir) / f"{args.run_id}.csv"

    def job_for(build: int, builds: int | None) -> Job:
        plan = build_plan(args, extra, scratch, build, builds, deadline_args(deadline_s))
        if builds is not None and build >= builds:  # past the profile's builds: the budget's time left
            plan = replace(plan, extra=True)
        return Job(python_module("gpubench.harness.processes.build_main"), dict(os.environ), hold_sigint=True,
                   plan=plan)

    verbose = asks_verbose(extra)  # else each build's end line says it, and the table is pytest-benchmark's -v

    def announce(build: int, builds: int) -> None:
        if not verbose:
            return
        if build >= builds and more is not None:
            print(more.announce(build), flush=True)
        elif build and (budgeted is None or budgeted.starts(build)):
            print(f"gpubench: build {build + 1} of {builds} of each case, in a fresh process", flush=True)

    launcher = build_launcher(args)
    budgeted = None if deadline_s is None else WithinBudget(launcher, deadline_s, csv_path)
    more = None if deadline_s is None else ExtraBuilds(deadline_s, csv_path)
    try:
        outcome = launch_builds(budgeted or launcher, job_for, BUILD_STOPS, announce,
                                more or (lambda build, answers: False))
        tables = [Path(answer.benchmark_json) for answer in outcome.answers if answer.benchmark_json]
        if verbose:
            print_one_table(tables, verbose=any(answer.verbose_table for answer in outcome.answers))
    finally:
        getattr(launcher, "close", lambda: None)()
        shutil.rmtree(scratch, ignore_errors=True)
    for note in outcome.notes + (budgeted.notes() if budgeted is not None else []):
        print(f"gpubench: {no_cases_line(args, extra) if note == NO_CASES_LINE else note}", file=sys.stderr)
    if outcome.cut_short:
        print(f"gpubench: {outcome.cut_short}: {count_rows_safely(csv_path)} rows kept in {csv_path} (each whole)",
              file=sys.stderr)
    if outcome.died:
        print(f"\ngpubench: {outcome.died}: {count_rows_safely(csv_path)} rows kept in {csv_path} (each whole); "
              "the case in progress was not recorded — re-run with another --run-id for the rest", file=sys.stderr)
    return outcome.code


# --device cuda:all: the micro-benchmarks on each visible GPU in turn, one run per GPU, then one report that sets
# the GPUs side by side; each build selects them itself (build_answer.MICRO_MARKEXPR and-ed with the user's -m).
ALL_GPUS = "cuda:all"


def per_gpu_runs(args: argparse.Namespace, extra: list[str], count: int) -> list[tuple[argparse.Namespace, list[str]]]:
    """One `gpubench run` per GPU: --device cuda:i, run id `<run_id>-cuda<i>`, micro cases only, no report."""
    return [(argparse.Namespace(**{**vars(args), "device": f"cuda:{i}", "run_id": f"{args.run_id}-cuda{i}",
                                   "no_report": True, "micro_only": True}), extra) for i in range(count)]


def cmd_run_all_gpus(args: argparse.Namespace, extra: list[str]) -> int:
    from gpubench.harness.devices.device import cuda_device_count
    from gpubench.harness.records.results import new_run_id

    count = cuda_device_count()
    if count == 0:
        return fail("--device cuda:all: torch sees no CUDA GPU — use --device cpu, or check CUDA_VISIBLE_DEVICES and "
                    "the driver", code=ExitCode.REFUSED)
    args.run_id = args.run_id or new_run_id()
    code, csvs = 0, []
    for one, one_extra in per_gpu_runs(args, extra, count):
        print(f"gpubench: {one.device} ({one.run_id}), micro cases only", flush=True)
        one_code = cmd_run(one, one_extra)
        csvs += [p for p in [Path(args.results_dir) / f"{one.run_id}.csv"] if p.exists()]
        code = code or one_code
        if one_code in (*BUILD_STOPS, ExitCode.INTERRUPTED):
            break  # interrupted or stopped: the GPUs measured so far are kept, the rest not started
    return (report_after_run(csvs, Path(args.results_dir) / f"{args.run_id}-report", code)
            if csvs and not args.no_report else code)


def say_noise(csv_path: Path, watch: CpuWatch) -> None:
    """The noise line of the run's rows (gpubench.reports.noise), when its builds disagree."""
    from gpubench.harness.commands.noise_report import print_noise_line
    from gpubench.reports.load import load_results

    try:
        frame = load_results([csv_path]) if csv_path.exists() else None
    except UsageError:  # a damaged file is the report's to name
        return
    if frame is not None:
        print_noise_line(frame, watch)
        say_predictions(frame)


def say_predictions(frame: Any) -> None:
    """How the budget's cost model did on this run's rows (gpubench.harness.core.cost_model), when it priced any."""
    from gpubench.harness.core.cost_model import prediction_line

    if "predicted_build_s" not in frame:
        return
    priced = frame[(frame["status"] == "ok") & frame["predicted_build_s"].notna() & frame["build_s"].notna()]
    line = prediction_line(list(zip(priced["build_s"].astype(float), priced["predicted_build_s"].astype(float))))
    if line is not None:
        print(f"gpubench: {line}", flush=True)


def cmd_run(args: argparse.Namespace, extra: list[str]) -> int:
    from gpubench.harness.records.results import check_run_id_text, new_run_id

    if args.device.strip().lower() == ALL_GPUS:
        return cmd_run_all_gpus(args, extra)
    if not BENCHES.is_dir() and not getattr(args, "tests", None):
        return fail(f"benches/ not found beside the harness ({BENCHES}): reinstall gpubench (pip install gpubench, "
                    "or pip install -e . in a checkout)")
    from gpubench.harness.processes.lifetime import STOP_WITH_ENV, token_problem
    from gpubench.harness.processes.rlimits import limits_problem

    stop_with = os.environ.get(STOP_WITH_ENV, "")  # a local fleet's: which process's end stops the run
    # a tiny ulimit fails inside pytest or torch with no line of ours
    problem = limits_problem() or (token_problem(stop_with) if stop_with else None)
    if problem:
        return fail(problem, code=ExitCode.REFUSED)
    if args.run_id is None:  # the report below needs to know the file's name
        args.run_id = new_run_id()
    try:  # before any build: a name no file system takes would otherwise fail here, after the builds, as a traceback
        run_id = check_run_id_text(args.run_id)
    except UsageError as error:
        return fail(str(error), code=ExitCode.REFUSED)
    watch = CpuWatch()
    code = run_builds(args, extra)
    csv_path = Path(args.results_dir) / f"{run_id}.csv"
    say_noise(csv_path, watch)
    if code in (BUILD_INTERRUPTED, ExitCode.INTERRUPTED, ExitCode.HANGUP, ExitCode.TERMINATED):
        kept = count_rows_safely(csv_path)  # records, not lines: a quoted reason may hold a newline
        print(f"gpubench: interrupted: {kept} rows kept in {csv_path} (each whole); re-run with another --run-id "
              "for the rest", file=sys.stderr)
        return ExitCode.INTERRUPTED if code in (BUILD_INTERRUPTED, ExitCode.INTERRUPTED) else code
    if code in BUILD_STOPS or code > SIGNAL_BASE or not csv_path.exists() or args.no_report:  # > 128: a build killed
        return code
    return report_after_run([csv_path], Path(args.results_dir) / f"{run_id}-report", code)
