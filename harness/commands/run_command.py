"""`gpubench run`: one pytest process per build of the suite, one pytest-benchmark table, then a report."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from harness.commands.common import BENCHES, count_rows_safely, fail, pytest_args, report_after_run, resolve_store
from harness.core.exits import BUILD_INTERRUPTED, BUILD_STOPS, SIGNAL_BASE, ExitCode

PASSES_PYTEST_ARGS = True


def setup_arguments(sub: argparse._SubParsersAction) -> None:
    from harness.core.options import add_to_parser

    run = sub.add_parser("run", help="run the benchmark suite (pytest benches --benchmark-only), then write a report",
                         description="Runs the suite through pytest-benchmark. Arguments gpubench does not know are passed to pytest (e.g. -k matmul, --benchmark-json out.json).")
    add_to_parser(run)
    run.add_argument("--no-report", action="store_true", help="skip the report after the run")


def run_from_args(args: argparse.Namespace, extra: list[str]) -> int:
    if problem := resolve_store(args):
        return fail(problem, code=ExitCode.REFUSED)
    return cmd_run(args, extra)


def per_build_args(extra: list[str], build: int) -> list[str]:
    """pytest-benchmark's output files get one name per build process (else each would overwrite
    the last): --benchmark-json X -> X.b<k>.json, --benchmark-save NAME -> NAME-b<k>."""
    if build == 0:
        return extra
    out, suffix = [], {"--benchmark-json": lambda v: f"{Path(v).with_suffix('')}.b{build}.json", "--benchmark-save": lambda v: f"{v}-b{build}"}
    pending: str | None = None
    for arg in extra:
        if pending:
            out.append(suffix[pending](arg))
            pending = None
        elif arg in suffix:
            out.append(arg)
            pending = arg
        elif "=" in arg and arg.split("=", 1)[0] in suffix:
            flag, value = arg.split("=", 1)
            out.append(f"{flag}={suffix[flag](value)}")
        else:
            out.append(arg)
    return out


def benchmark_json_of(argv: list[str]) -> str | None:
    """The --benchmark-json file named in a pytest argv, if any (the last one counts, as in argparse)."""
    found = None
    for index, arg in enumerate(argv):
        if arg.startswith("--benchmark-json="):
            found = arg.split("=", 1)[1]
        elif arg == "--benchmark-json" and index + 1 < len(argv):
            found = argv[index + 1]
    return found


def build_table_args(extra: list[str], build: int, scratch: Path) -> list[str]:
    """A build process prints no pytest-benchmark table (--benchmark-quiet) and writes its JSON, to
    the user's per-build file or the run's scratch folder: the run prints one table from them."""
    argv = per_build_args(extra, build)
    own_json = [] if benchmark_json_of(argv) else [f"--benchmark-json={scratch / f'build-{build}.json'}"]
    return [*argv, "--benchmark-quiet", *own_json]


def run_builds(args: argparse.Namespace, extra: list[str]) -> int:
    """One pytest process per build (harness.processes.launch.run_builds), each dying with this one; then
    one pytest-benchmark table for the whole run."""
    import os
    import shutil
    import tempfile

    from harness.commands.bench_table import print_one_table
    from harness.commands.budget_builds import WithinBudget, deadline_args, run_deadline_s
    from harness.processes.launch import ProcessLauncher, python_module, stopped_limit_s
    from harness.processes.launch import run_builds as launch_builds
    from harness.processes.lifetime import (
        STOP_WITH_ENV,
        adopt_orphans,
        run_folder_prefix,
        sweep_dead_run_folders,
    )

    sweep_dead_run_folders(Path(tempfile.gettempdir()))  # left by a run killed with SIGKILL
    adopt_orphans()  # what a build leaves behind (a daemon of its own) is killed when it ends
    scratch = Path(tempfile.mkdtemp(prefix=run_folder_prefix(os.getpid())))
    argvs: list[list[str]] = []
    deadline_s = run_deadline_s(args)  # --budget: every build process shares the run's one end
    deadline = deadline_args(deadline_s)
    csv_path = Path(args.results_dir) / f"{args.run_id}.csv"

    def argv_for(build: int) -> list[str]:
        argvs.append(python_module("harness.processes.build_main", *pytest_args(args, build_table_args(extra, build, scratch)),
                                   f"--gpubench-build={build}", *deadline))
        return argvs[-1]

    def announce(build: int, builds: int) -> None:
        if build and (budgeted is None or budgeted.starts(build)):
            print(f"gpubench: build {build + 1} of {builds} of each case, in a fresh process", flush=True)

    # a local fleet's job: its fleet gone (kill -9), nobody would read what it measures
    launcher = ProcessLauncher(stopped_limit_s(args.profile), os.environ.get(STOP_WITH_ENV, ""))
    budgeted = None if deadline_s is None else WithinBudget(launcher, deadline_s, csv_path)
    try:
        outcome = launch_builds(budgeted or launcher, argv_for, dict(os.environ), BUILD_STOPS, announce)
        print_one_table([Path(name) for name in map(benchmark_json_of, argvs) if name], verbose="--benchmark-verbose" in extra)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for note in outcome.notes + (budgeted.notes() if budgeted is not None else []):
        print(f"gpubench: {note}", file=sys.stderr)
    if outcome.cut_short:
        print(f"gpubench: {outcome.cut_short}: {count_rows_safely(csv_path)} rows kept in {csv_path} (each whole)", file=sys.stderr)
    if outcome.died:
        print(f"gpubench: {outcome.died}: {count_rows_safely(csv_path)} rows kept in {csv_path} (each whole); "
              "the case in progress was not recorded — re-run with another --run-id for the rest", file=sys.stderr)
    return outcome.code


def timer_problem(extra: list[str]) -> str | None:
    """pytest-benchmark loads --benchmark-timer while parsing arguments, with a traceback when it
    cannot: check it here first, for one line."""
    import importlib

    for index, arg in enumerate(extra):
        name = arg.split("=", 1)[1] if arg.startswith("--benchmark-timer=") else extra[index + 1] if arg == "--benchmark-timer" and index + 1 < len(extra) else None
        if name is None:
            continue
        module, _, attr = name.rpartition(".")
        try:
            getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError, ValueError) as error:
            return f"--benchmark-timer {name!r} cannot be loaded ({error}) — pass a dotted name such as time.perf_counter"
    return None


# --device cuda:all: the micro-benchmarks (matmul, elementwise, transfer, inference, conv2d, selfcheck,
# speedup) on each visible GPU in turn, one run per GPU, then one report that sets the GPUs side by side.
ALL_GPUS = "cuda:all"
MICRO_MARKEXPR = "not slow and not training and not distributed"


def micro_only(extra: list[str]) -> list[str]:
    """`extra` with its -m expression (if any) and-ed with the micro cases' markers."""
    out, user, skip = [], None, False
    for index, arg in enumerate(extra):
        if skip:
            skip = False
        elif arg == "-m" and index + 1 < len(extra):
            user, skip = extra[index + 1], True
        elif arg.startswith("-m") and len(arg) > 2 and not arg.startswith("--"):
            user = arg[2:].lstrip("=")
        else:
            out.append(arg)
    return [*out, "-m", f"({user}) and ({MICRO_MARKEXPR})" if user else MICRO_MARKEXPR]


def per_gpu_runs(args: argparse.Namespace, extra: list[str], count: int) -> list[tuple[argparse.Namespace, list[str]]]:
    """One `gpubench run` per GPU: --device cuda:i, run id `<run_id>-cuda<i>`, micro cases only, no report of its own."""
    return [(argparse.Namespace(**{**vars(args), "device": f"cuda:{i}", "run_id": f"{args.run_id}-cuda{i}", "no_report": True}), micro_only(extra))
            for i in range(count)]


def cmd_run_all_gpus(args: argparse.Namespace, extra: list[str]) -> int:
    from harness.devices.device import cuda_device_count
    from harness.records.results import new_run_id

    count = cuda_device_count()
    if count == 0:
        return fail("--device cuda:all: torch sees no CUDA GPU — use --device cpu, or check CUDA_VISIBLE_DEVICES and the driver", code=ExitCode.REFUSED)
    args.run_id = args.run_id or new_run_id()
    code, csvs = 0, []
    for one, one_extra in per_gpu_runs(args, extra, count):
        print(f"gpubench: {one.device} ({one.run_id}), micro cases: -m '{one_extra[-1]}'", flush=True)
        one_code = cmd_run(one, one_extra)
        csvs += [p for p in [Path(args.results_dir) / f"{one.run_id}.csv"] if p.exists()]
        code = code or one_code
        if one_code in (*BUILD_STOPS, ExitCode.INTERRUPTED):
            break  # interrupted or stopped: the GPUs measured so far are kept, the rest not started
    return report_after_run(csvs, Path(args.results_dir) / f"{args.run_id}-report", code) if csvs and not args.no_report else code


def cmd_run(args: argparse.Namespace, extra: list[str]) -> int:
    from harness.records.results import new_run_id

    if args.device.strip().lower() == ALL_GPUS:
        return cmd_run_all_gpus(args, extra)
    if not BENCHES.is_dir():
        return fail(f"benches/ not found beside the harness ({BENCHES}): run gpubench from a source checkout (pip install -e .)")
    from harness.processes.lifetime import STOP_WITH_ENV, token_problem
    from harness.processes.rlimits import limits_problem

    stop_with = os.environ.get(STOP_WITH_ENV, "")  # a local fleet's: which process's end stops the run
    # a tiny ulimit fails inside pytest or torch with no line of ours
    problem = timer_problem(extra) or limits_problem() or (token_problem(stop_with) if stop_with else None)
    if problem:
        return fail(problem, code=ExitCode.REFUSED)
    if args.run_id is None:  # the report below needs to know the file's name; an empty one is refused by the plugin, as under pytest
        args.run_id = new_run_id()
    run_id = args.run_id
    code = run_builds(args, extra)
    csv_path = Path(args.results_dir) / f"{run_id}.csv"
    if code in (BUILD_INTERRUPTED, ExitCode.INTERRUPTED, ExitCode.HANGUP, ExitCode.TERMINATED):  # interrupted (Ctrl-C, SIGHUP or SIGTERM): say what was kept
        kept = count_rows_safely(csv_path)  # records, not lines: a quoted reason may hold a newline
        print(f"gpubench: interrupted: {kept} rows kept in {csv_path} (each whole); re-run with another --run-id for the rest", file=sys.stderr)
        return ExitCode.INTERRUPTED if code in (BUILD_INTERRUPTED, ExitCode.INTERRUPTED) else code
    if code in BUILD_STOPS or code > SIGNAL_BASE or not csv_path.exists() or args.no_report:  # > 128: a build process was killed
        return code
    return report_after_run([csv_path], Path(args.results_dir) / f"{run_id}-report", code)
