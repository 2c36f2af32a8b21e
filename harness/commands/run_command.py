"""`gpubench run`: one pytest process per build of the suite, one pytest-benchmark table, then a
report."""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpubench.harness.core.pytest_args import asks_verbose, saves_benchmarks
from gpubench.harness.commands.common import (
    BENCHES,
    NO_ROWS,
    RUN_OPTIONS_FLAG,
    add_tests_argument,
    count_rows_safely,
    fail,
    no_cases_line,
    nothing_measured,
    read_options,
    report_after_run,
    resolve_store,
    rows_kept,
    suite_args,
    check_tests,
)
from gpubench.harness.core.exits import (
    BUILD_INTERRUPTED,
    BUILD_STOPS,
    NO_CASES_LINE,
    SIGNAL_BASE,
    ExitCode,
    UsageError,
)
from gpubench.harness.processes.cpu_readings import CpuWatch
from gpubench.harness.processes.protocol import BuildPlan
from gpubench.harness.core.console import CONSOLE

if TYPE_CHECKING:
    from collections.abc import Callable

    from gpubench.harness.processes.build_runs import BuildsOutcome
    from gpubench.harness.processes.launch import Job, ProcessLauncher

PASSES_PYTEST_ARGS = True


def setup_arguments(sub: argparse._SubParsersAction) -> None:
    from gpubench.harness.core.options import add_to_parser

    run = sub.add_parser(
        "run",
        help="run the benchmark suite (pytest benches --benchmark-only), then write a report",
        description="Runs the suite through pytest-benchmark, one process per build. Arguments "
        "gpubench does not know are passed to pytest (e.g. -k matmul, --benchmark-json "
        "out.json).",
    )
    add_to_parser(run)
    # a fleet's job: the fleet's options, read there
    run.add_argument(f"--{RUN_OPTIONS_FLAG}", help=argparse.SUPPRESS)
    add_tests_argument(run)
    run.add_argument("--no-report", action="store_true", help="skip the report after the run")
    run.add_argument(
        "--no-fork",
        action="store_true",
        help="start each build as a fresh interpreter (about 2.5 s of imports each) "
        "instead of forking it from a process that imported torch once",
    )


def run_from_args(args: argparse.Namespace, extra: list[str]) -> int:
    from gpubench.harness.commands.run_checks import (
        check_pytest_args,
        check_results_dir,
        check_selection,
    )

    args.run = read_options(args)
    check_tests(args)
    resolve_store(args)
    check_results_dir(args.run.results_dir)
    check_pytest_args(extra)
    check_selection(extra)
    # a device this machine does not have
    wait_for_quiet(args)
    try:
        code = cmd_run(args, extra)
    except UsageError as error:
        code = fail(str(error), code=ExitCode.REFUSED)
    # over another run's record only if this run made the CSV (store.write_exit)
    record_exit(args, code)
    return code


def wait_for_quiet(args: argparse.Namespace) -> None:
    """--wait-quiet: the wait happens here, before the run's budget starts, and the builds then
    measure at once."""
    wait_s, args.run = args.run.wait_quiet_s, replace(args.run, wait_quiet_s=None)
    if wait_s is None:
        return
    # torch, only when asked to wait
    from gpubench.harness.devices.device import resolve_device
    from gpubench.harness.devices.machine_load import wait_quiet

    device = resolve_device("cuda" if args.run.device == ALL_GPUS else args.run.device)
    wait_quiet(device, wait_s, lambda line: CONSOLE.show(line))


def run_csv(args: argparse.Namespace) -> Path | None:
    """The run's CSV, where its run id is a valid file name (a refused one has no file of its
    own)."""
    from gpubench.harness.records.results import check_run_id_text

    try:
        return Path(args.run.results_dir) / f"{check_run_id_text(args.run.run_id or '')}.csv"
    except UsageError:
        return None


def record_exit(args: argparse.Namespace, code: int) -> None:
    """The run's exit code beside its rows (gpubench.harness.records.store.write_exit)."""
    from gpubench.harness.records.store import write_exit

    csv_path = run_csv(args)
    # its builds wrote rows: a refused run's build writes none
    made_csv = bool(getattr(args, "rows_written", 0))
    if csv_path is not None and (
        problem := write_exit(csv_path.parent, csv_path.stem, code, made_csv=made_csv)
    ):
        CONSOLE.note(problem)


def build_plan(
    args: argparse.Namespace,
    extra: list[str],
    scratch: Path,
    build: int,
    builds: int | None,
    deadline_s: float | None = None,
) -> BuildPlan:
    """Build k's plan: the user's pytest arguments untouched (the build tags its output files:
    X.json -> X.b<k>.json, NAME -> NAME-b<k>); pytest-benchmark's JSON in the scratch folder when
    the user names none, for one table."""
    # pytest-benchmark makes its storage folder (.benchmarks) at start even when nothing is saved:
    # the scratch's
    storage = [] if saves_benchmarks(extra) else [f"--benchmark-storage={scratch / 'benchmarks'}"]
    return BuildPlan(
        build,
        list(extra),
        [*suite_args(args), *storage],
        args.run,
        builds,
        output_tag=f"b{build}" if build else "",
        table_json=str(scratch / f"build-{build}.json"),
        micro_only=bool(getattr(args, "micro_only", False)),
        deadline_s=deadline_s,
    )


def build_launcher(args: argparse.Namespace, deadline_s: float | None) -> ProcessLauncher:
    """Builds forked from a fork server unless --no-fork; a local fleet's job stops with its fleet
    (killed with -9, nobody would read what it measures); under a budget, a build still running past
    the run's end is cut from outside (launch.BuildWatch), OUTSIDE_AFTER_S after the in-process cut,
    which names the case, had its chance."""
    from gpubench.harness.core.duration_text import format_duration
    from gpubench.harness.budget.clock import grace_s
    from gpubench.harness.pytest_plugin.forked import ForkLauncher
    from gpubench.harness.processes.launch import ProcessLauncher, stopped_limit_s
    from gpubench.harness.processes.lifetime import STOP_WITH_ENV

    kind = ProcessLauncher if getattr(args, "no_fork", False) else ForkLauncher
    launcher = kind(stopped_limit_s(args.run.profile), os.environ.get(STOP_WITH_ENV, ""))
    budget_s = args.run.run_budget_s
    if deadline_s is not None and budget_s is not None:
        after_s = grace_s(budget_s) + OUTSIDE_AFTER_S
        launcher.cut_at_s = deadline_s + after_s
        launcher.cut_why = (
            f"did not end within the run's {format_duration(budget_s)} budget and "
            f"{format_duration(after_s)} more (its code never returned to Python, or blocked the "
            "in-process cut: a C call, signals blocked)"
        )
    return launcher


# The in-process cut (a SIGALRM at the run's end + its grace) fails the case by name and closes the
# session; the cut from outside, for code that cut never reaches, waits this much longer: what a
# build gets to unwind its case after a signal (launch.STOP_GRACE_S).
OUTSIDE_AFTER_S = 10.0


def run_builds(args: argparse.Namespace, extra: list[str]) -> int:
    """One pytest process per build, each dying with this one; then one pytest-benchmark table for
    the whole run."""
    import shutil
    import tempfile

    from gpubench.harness.budget.clock import run_deadline_s
    from gpubench.harness.processes.launch import Job, python_module, stop_requests
    from gpubench.harness.processes.lifetime import (
        adopt_orphans,
        run_folder_prefix,
        sweep_dead_run_folders,
    )

    # left by a run killed with SIGKILL
    sweep_dead_run_folders(Path(tempfile.gettempdir()))
    # what a build leaves behind (a daemon of its own) is killed when it ends
    adopt_orphans()
    scratch = Path(tempfile.mkdtemp(prefix=run_folder_prefix(os.getpid())))
    # every build process shares the run's one end
    budget_s = args.run.run_budget_s
    deadline_s = None if budget_s is None else run_deadline_s(budget_s, time.time())

    def job_for(build: int, builds: int | None) -> Job:
        plan = build_plan(args, extra, scratch, build, builds, deadline_s)
        # past the profile's builds: the budget's time left
        if builds is not None and build >= builds:
            plan = replace(plan, extra=True)
        return Job(
            python_module("gpubench.harness.processes.build_main"),
            dict(os.environ),
            hold_sigint=True,
            plan=plan,
        )

    launcher = build_launcher(args, deadline_s)
    # a signal while the fork server closes or the table prints (after the builds' own watch) stops
    # the run as well
    with stop_requests() as request:
        try:
            outcome, budget_notes = launched_builds(args, extra, launcher, job_for, deadline_s)
        finally:
            getattr(launcher, "close", lambda: None)()
            shutil.rmtree(scratch, ignore_errors=True)
    if request.signum and not outcome.stopped:
        from gpubench.harness.processes.build_runs import signal_exit

        outcome = replace(outcome, code=signal_exit(request.signum))
    say_outcome(outcome, budget_notes, args, extra)
    return outcome.code


def launched_builds(
    args: argparse.Namespace,
    extra: list[str],
    launcher: ProcessLauncher,
    job_for: Callable[[int, int | None], Job],
    deadline_s: float | None,
) -> tuple[BuildsOutcome, list[str]]:
    """The run's builds (within the budget, then extra ones while it has time), their one table
    under -v; the budget's notes."""
    from gpubench.harness.commands.bench_table import print_one_table
    from gpubench.harness.commands.budget_builds import ExtraBuilds, WithinBudget
    from gpubench.harness.processes.build_runs import run_builds as launch_builds

    csv_path = Path(args.run.results_dir) / f"{args.run.run_id}.csv"
    # else each build's end line says it, and the table is pytest-benchmark's -v
    verbose = asks_verbose(extra)
    budgeted = None if deadline_s is None else WithinBudget(launcher, deadline_s, csv_path)
    more = None if deadline_s is None else ExtraBuilds(deadline_s, csv_path)

    def announce(build: int, builds: int) -> None:
        if not verbose:
            return
        if build >= builds and more is not None:
            CONSOLE.show(more.announce(build))
        elif build and (budgeted is None or budgeted.starts(build)):
            CONSOLE.say(f"build {build + 1} of {builds} of each case, in a fresh process")

    outcome = launch_builds(
        budgeted or launcher, job_for, BUILD_STOPS, announce, more or (lambda build, answers: False)
    )
    # read by record_exit
    args.rows_written = sum(answer.rows_written for answer in outcome.answers)
    # the plan's promise, checked against the rows once the run has ended (say_delivery)
    args.promise = next(
        ((answer.promised, answer.left_out) for answer in outcome.answers if answer.build == 0),
        ([], []),
    )
    if verbose:
        tables = [
            Path(answer.benchmark_json) for answer in outcome.answers if answer.benchmark_json
        ]
        print_one_table(tables, verbose=any(answer.verbose_table for answer in outcome.answers))
    return outcome, budgeted.notes() if budgeted is not None else []


def say_outcome(
    outcome: BuildsOutcome, budget_notes: list[str], args: argparse.Namespace, extra: list[str]
) -> None:
    """The lines that say how the builds ended, each with the rows kept."""
    csv_path = Path(args.run.results_dir) / f"{args.run.run_id}.csv"
    for note in outcome.notes + budget_notes:
        CONSOLE.note(no_cases_line(args, extra) if note == NO_CASES_LINE else note)
    if outcome.cut_short:
        CONSOLE.note(f"{outcome.cut_short}: {rows_kept(csv_path)}")
    if outcome.cut:
        CONSOLE.note(
            f"budget: {outcome.cut}; {rows_kept(csv_path)} — raise --budget if it is only slow"
        )
    if outcome.died:
        CONSOLE.show_error(
            f"\ngpubench: {outcome.died}: {rows_kept(csv_path)}; the case in progress was not "
            "recorded"
            + (" — re-run with another --run-id for the rest" if csv_path.exists() else "")
        )


# --device cuda:all: the micro-benchmarks on each visible GPU in turn, one run per GPU, then one
# report that sets the GPUs side by side; each build selects them itself
# (build_answer.MICRO_MARKEXPR and-ed with the user's -m).
ALL_GPUS = "cuda:all"


def per_gpu_runs(
    args: argparse.Namespace, extra: list[str], count: int
) -> list[tuple[argparse.Namespace, list[str]]]:
    """One `gpubench run` per GPU: --device cuda:i, run id `<run_id>-cuda<i>`, micro cases only, no
    report."""
    return [
        (
            argparse.Namespace(
                **{
                    **vars(args),
                    "no_report": True,
                    "micro_only": True,
                    "run": replace(
                        args.run, device=f"cuda:{i}", run_id=f"{args.run.run_id}-cuda{i}"
                    ),
                }
            ),
            extra,
        )
        for i in range(count)
    ]


def cmd_run_all_gpus(args: argparse.Namespace, extra: list[str]) -> int:
    from gpubench.harness.devices.device import cuda_device_count
    from gpubench.harness.records.results import new_run_id

    count = cuda_device_count()
    if count == 0:
        return fail(
            "--device cuda:all: torch sees no CUDA GPU — use --device cpu, or check "
            "CUDA_VISIBLE_DEVICES and the driver",
            code=ExitCode.REFUSED,
        )
    args.run = replace(args.run, run_id=args.run.run_id or new_run_id())
    code, csvs = 0, []
    for one, one_extra in per_gpu_runs(args, extra, count):
        CONSOLE.say(f"{one.run.device} ({one.run.run_id}), micro cases only")
        one_code = cmd_run(one, one_extra)
        csvs += [p for p in [Path(args.run.results_dir) / f"{one.run.run_id}.csv"] if p.exists()]
        code = code or one_code
        if one_code in (*BUILD_STOPS, ExitCode.INTERRUPTED):
            # interrupted or stopped: the GPUs measured so far are kept, the rest not started
            break
    return (
        report_after_run(csvs, Path(args.run.results_dir) / f"{args.run.run_id}-report", code)
        if csvs and not args.no_report
        else code
    )


def say_noise(csv_path: Path, watch: CpuWatch) -> None:
    """The noise line of the run's rows (gpubench.reports.render.noise), when its builds
    disagree."""
    from gpubench.harness.commands.noise_report import print_noise_line
    from gpubench.reports.judge.load import load_results

    try:
        frame = load_results([csv_path]) if csv_path.exists() else None
    # a damaged file is the report's to name
    except UsageError:
        return
    if frame is not None:
        print_noise_line(frame, watch)
        say_predictions(frame)


def say_predictions(frame: Any) -> None:
    """How the budget's cost model did on this run's rows (gpubench.harness.budget.cost_model), when
    it priced any."""
    from gpubench.harness.budget.cost_model import prediction_line

    if "predicted_build_s" not in frame:
        return
    priced = frame[
        (frame["status"] == "ok") & frame["predicted_build_s"].notna() & frame["build_s"].notna()
    ]
    line = prediction_line(
        list(zip(priced["build_s"].astype(float), priced["predicted_build_s"].astype(float)))
    )
    if line is not None:
        CONSOLE.say(line)


def cmd_run(args: argparse.Namespace, extra: list[str]) -> int:
    from gpubench.harness.records.results import check_run_id_text, new_run_id

    if args.run.device == ALL_GPUS:
        return cmd_run_all_gpus(args, extra)
    if not BENCHES.is_dir() and not getattr(args, "tests", None):
        return fail(
            f"benches/ not found beside the harness ({BENCHES}): reinstall gpubench (pip install "
            "gpubench, or pip install -e . in a checkout)"
        )
    from gpubench.harness.processes.lifetime import STOP_WITH_ENV, check_stop_token
    from gpubench.harness.processes.rlimits import check_limits

    # a tiny ulimit fails inside pytest or torch with no line of ours
    check_limits()
    # a local fleet's: which process's end stops the run
    if stop_with := os.environ.get(STOP_WITH_ENV, ""):
        check_stop_token(stop_with)
    # the report below needs to know the file's name
    if args.run.run_id is None:
        args.run = replace(args.run, run_id=new_run_id())
    # before any build: a name no file system takes would otherwise fail here, after the builds, as
    # a traceback
    run_id = check_run_id_text(args.run.run_id)
    watch = CpuWatch()
    csv_path = Path(args.run.results_dir) / f"{run_id}.csv"
    from gpubench.harness.processes.lifetime import stops_raised

    # a stop outside the builds' own watch (before them, after them, in the report): a line, not a
    # traceback
    try:
        with stops_raised():
            code = run_builds(args, extra)
            return after_builds(args, code, csv_path, watch)
    # a StopSignal (or Ctrl-C where another handler was in place)
    except KeyboardInterrupt as stop:
        return interrupted(
            int(getattr(stop, "code", ExitCode.INTERRUPTED)),
            csv_path,
            report_due=not args.no_report,
        )


def after_builds(args: argparse.Namespace, code: int, csv_path: Path, watch: CpuWatch) -> int:
    """The noise line, then the interrupted line (builds stopped: the rest is for another run) or
    the report."""
    say_noise(csv_path, watch)
    if code in (BUILD_INTERRUPTED, ExitCode.INTERRUPTED, ExitCode.HANGUP, ExitCode.TERMINATED):
        return interrupted(code, csv_path, report_due=False)
    written = getattr(args, "rows_written", 0)
    kept = count_rows_safely(csv_path)
    # the file, or its folder, removed or replaced under the run: said, and the run fails
    if written > kept:
        gone = "is gone" if not csv_path.exists() else f"holds {kept} of them"
        CONSOLE.error(
            f"the builds wrote {written} rows to {csv_path}, which {gone}: something removed or "
            "replaced the file (or its folder) during the run — keep the results folder while a "
            "run writes it"
        )
        code = max(code, ExitCode.FAILED)
    if code == ExitCode.OK and (line := nothing_measured(csv_path)):
        CONSOLE.error(line)
        code = ExitCode.NOTHING_MEASURED
    # > 128: a build killed
    if not (code in BUILD_STOPS or code > SIGNAL_BASE or not csv_path.exists() or args.no_report):
        code = report_after_run([csv_path], csv_path.with_name(f"{csv_path.stem}-report"), code)
    say_delivery(args, csv_path)
    return code


def say_delivery(args: argparse.Namespace, csv_path: Path) -> None:
    """The run's last lines: the headline cases its plan promised, against what its rows hold."""
    from gpubench.harness.budget.promise import delivery_lines
    from gpubench.harness.records.results_reader import read_rows

    promised, left_out = getattr(args, "promise", ([], []))
    try:
        rows = read_rows(csv_path) if csv_path.exists() else []
    except (OSError, ValueError):
        rows = []
    for line in delivery_lines(promised, left_out, rows):
        CONSOLE.show(line)


def interrupted(code: int, csv_path: Path, report_due: bool) -> int:
    """The stop line of an interrupted run, with the rows kept (none: it names no file) and, stopped
    after its builds (`report_due`), how to make the report it did not write; the exit code for the
    signal (130 for Ctrl-C)."""
    if not csv_path.exists():
        CONSOLE.note(f"interrupted: {NO_ROWS}")
    elif not report_due:
        CONSOLE.note(
            f"interrupted: {rows_kept(csv_path)}; re-run with another --run-id for the rest"
        )
    else:
        CONSOLE.note(
            f"interrupted: {rows_kept(csv_path)}; the report was not written — gpubench report "
            f"{csv_path} makes it later"
        )
    return ExitCode.INTERRUPTED if code in (BUILD_INTERRUPTED, ExitCode.INTERRUPTED) else code
