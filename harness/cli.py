"""`gpubench`: run the suite, print the fingerprint, build reports, compare runs."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from harness.options import RESULTS_FULL_EXIT  # torch-free, like this module's top

SUITE_ROOT = Path(__file__).resolve().parent.parent
BENCHES = SUITE_ROOT / "benches"


def fail(message: str, code: int = 2) -> int:
    print(f"gpubench: error: {message}", file=sys.stderr)
    return code


def _run_parser(sub: argparse._SubParsersAction) -> None:
    from harness.options import add_to_parser

    run = sub.add_parser("run", help="run the benchmark suite (pytest benches --benchmark-only), then write a report",
                         description="Runs the suite through pytest-benchmark. Arguments gpubench does not know are passed to pytest (e.g. -k matmul, --benchmark-json out.json).")
    add_to_parser(run)
    run.add_argument("--no-report", action="store_true", help="skip the report after the run")


def _ab_parser(sub: argparse._SubParsersAction) -> None:
    from harness.ab import DEFAULT_PAIRS
    from harness.options import add_to_parser

    ab = sub.add_parser("ab", help="paired A/B session: the same cases under two environments, builds alternating; verdict from the pairs",
                        description="Runs the selected cases under side A and side B, build by build in alternation (A B, B A, ...), each "
                                    "build in its own process, then judges B against A from the paired differences. Arguments gpubench "
                                    "does not know are passed to pytest (e.g. -k matmul, -m 'not slow').")
    add_to_parser(ab)
    ab.add_argument("--pairs", type=int, default=DEFAULT_PAIRS, help=f"builds per side, alternating (default {DEFAULT_PAIRS})")
    for side in ("a", "b"):
        ab.add_argument(f"--{side}-python", default=None, help=f"interpreter of side {side.upper()} (default: this one), e.g. a venv with another torch")
        ab.add_argument(f"--{side}-env", action="append", metavar="NAME=VALUE", help=f"an environment variable of side {side.upper()} (repeatable)")
        ab.add_argument(f"--{side}-arg", action="append", metavar="ARG", help=f"an extra pytest/gpubench argument of side {side.upper()}, "
                        f"e.g. --{side}-arg=--gpubench-dataset=synthetic (repeatable)")
    ab.add_argument("--threshold", default="5%", help="change that counts (default 5%%)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpubench", description="Synchronized PyTorch benchmarks and cross-machine reports.")
    sub = parser.add_subparsers(dest="command", required=True)
    _run_parser(sub)
    env = sub.add_parser("env", help="print this machine's fingerprint")
    env.add_argument("--device", default="auto")
    env.add_argument("--json", action="store_true", help="print JSON instead of aligned lines")
    report = sub.add_parser("report", help="merge result CSVs into report.md, plots and a merged CSV")
    report.add_argument("results", nargs="+", type=Path, help="CSV files or folders of them")
    report.add_argument("--out", required=True, help="output folder")  # a str: Path("") would read as "."
    report.add_argument("--baseline", default=None, help="machine_id or hostname to compare the others against")
    _ab_parser(sub)
    from harness.fleet_command import add_fleet_parser

    add_fleet_parser(sub)
    compare = sub.add_parser("compare", help="compare two runs case by case; exit 1 on a significant slowdown")
    compare.add_argument("base", type=Path)
    compare.add_argument("new", type=Path)
    compare.add_argument("--threshold", default="5%", help="slowdown that fails the comparison (default 5%%)")
    return parser


def pytest_args(args: argparse.Namespace, extra: list[str]) -> list[str]:
    from harness.options import to_pytest_argv

    only = [] if "--benchmark-disable" in extra else ["--benchmark-only"]  # the two exclude each other in pytest-benchmark
    # The config file named, not found: pytest looks for it from the common folder of every existing
    # path on the command line, and an existing --benchmark-json outside the checkout made that "/"
    # (no config, no conftest, 0 cases).
    return [str(BENCHES), *only, "-v", f"--rootdir={SUITE_ROOT}", f"--config-file={SUITE_ROOT / 'pyproject.toml'}", "-p", "no:cacheprovider",
            *to_pytest_argv(args), *extra]


# Exit codes that end the run: interrupted (2), internal error (3), usage (4), results folder full
# (75), SIGHUP (129), SIGTERM (143). No further build process starts after one of them.
HANGUP_EXIT, TERMINATED_EXIT = 129, 143
STOP_CODES = (2, 3, 4, RESULTS_FULL_EXIT, HANGUP_EXIT, TERMINATED_EXIT)


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
    """One pytest process per build (harness.launch.run_builds), each dying with this one; then
    one pytest-benchmark table for the whole run."""
    import shutil
    import tempfile

    from harness.bench_table import print_one_table
    from harness.launch import ProcessLauncher, python_module, stopped_limit_s
    from harness.launch import run_builds as launch_builds
    from harness.lifetime import (
        STOP_WITH_ENV,
        adopt_orphans,
        run_folder_prefix,
        sweep_dead_run_folders,
    )

    sweep_dead_run_folders(Path(tempfile.gettempdir()))  # left by a run killed with SIGKILL
    adopt_orphans()  # what a build leaves behind (a daemon of its own) is killed when it ends
    scratch = Path(tempfile.mkdtemp(prefix=run_folder_prefix(os.getpid())))
    argvs: list[list[str]] = []

    def argv_for(build: int) -> list[str]:
        argvs.append(python_module("harness.build_main", *pytest_args(args, build_table_args(extra, build, scratch)), f"--gpubench-build={build}"))
        return argvs[-1]

    def announce(build: int, builds: int) -> None:
        if build:
            print(f"gpubench: build {build + 1} of {builds} of each case, in a fresh process", flush=True)

    # a local fleet's job: its fleet gone (kill -9), nobody would read what it measures
    launcher = ProcessLauncher(stopped_limit_s(args.profile), os.environ.get(STOP_WITH_ENV, ""))
    try:
        outcome = launch_builds(launcher, argv_for, dict(os.environ), STOP_CODES, announce)
        print_one_table([Path(name) for name in map(benchmark_json_of, argvs) if name], verbose="--benchmark-verbose" in extra)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    csv_path = Path(args.results_dir) / f"{args.run_id}.csv"
    for note in outcome.notes:
        print(f"gpubench: {note}", file=sys.stderr)
    if outcome.cut_short:
        print(f"gpubench: {outcome.cut_short}: {count_rows_safely(csv_path)} rows kept in {csv_path} (each whole)", file=sys.stderr)
    if outcome.died:
        print(f"gpubench: {outcome.died}: {count_rows_safely(csv_path)} rows kept in {csv_path} (each whole); "
              "the case in progress was not recorded — re-run with another --run-id for the rest", file=sys.stderr)
    return outcome.code


def count_rows_safely(csv_path: Path) -> int:
    """Rows in the run's file, 0 when there is none (the build died before its first row)."""
    from harness.results import count_rows

    return count_rows(csv_path) if csv_path.exists() else 0


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
    from harness.device import cuda_device_count
    from harness.results import new_run_id

    count = cuda_device_count()
    if count == 0:
        return fail("--device cuda:all: torch sees no CUDA GPU — use --device cpu, or check CUDA_VISIBLE_DEVICES and the driver", code=4)
    args.run_id = args.run_id or new_run_id()
    code, csvs = 0, []
    for one, one_extra in per_gpu_runs(args, extra, count):
        print(f"gpubench: {one.device} ({one.run_id}), micro cases: -m '{one_extra[-1]}'", flush=True)
        one_code = cmd_run(one, one_extra)
        csvs += [p for p in [Path(args.results_dir) / f"{one.run_id}.csv"] if p.exists()]
        code = code or one_code
        if one_code in (*STOP_CODES, 130):
            break  # interrupted or stopped: the GPUs measured so far are kept, the rest not started
    return _report_after_run(csvs, Path(args.results_dir) / f"{args.run_id}-report", code) if csvs and not args.no_report else code


def _report_after_run(csvs: list[Path], out: Path, code: int) -> int:
    from reports.build import ReportError, build_report

    try:
        report = build_report(csvs, out, baseline=None)
    except ReportError as error:
        return fail(str(error))
    except KeyboardInterrupt:
        return fail(f"interrupted while writing the report: the results are whole in {', '.join(map(str, csvs))}; run gpubench report on them --out DIR", code=130)
    print(f"gpubench: report -> {report}")
    return code


def cmd_run(args: argparse.Namespace, extra: list[str]) -> int:
    from harness.results import new_run_id

    if args.device.strip().lower() == ALL_GPUS:
        return cmd_run_all_gpus(args, extra)
    if not BENCHES.is_dir():
        return fail(f"benches/ not found beside the harness ({BENCHES}): run gpubench from a source checkout (pip install -e .)")
    from harness.lifetime import STOP_WITH_ENV, token_problem
    from harness.rlimits import limits_problem

    stop_with = os.environ.get(STOP_WITH_ENV, "")  # a local fleet's: which process's end stops the run
    # a tiny ulimit fails inside pytest or torch with no line of ours
    problem = timer_problem(extra) or limits_problem() or (token_problem(stop_with) if stop_with else None)
    if problem:
        return fail(problem, code=4)
    if args.run_id is None:  # the report below needs to know the file's name; an empty one is refused by the plugin, as under pytest
        args.run_id = new_run_id()
    run_id = args.run_id
    code = run_builds(args, extra)
    csv_path = Path(args.results_dir) / f"{run_id}.csv"
    if code in (2, 130, HANGUP_EXIT, TERMINATED_EXIT):  # interrupted (Ctrl-C, SIGHUP or SIGTERM): say what was kept
        kept = count_rows_safely(csv_path)  # records, not lines: a quoted reason may hold a newline
        print(f"gpubench: interrupted: {kept} rows kept in {csv_path} (each whole); re-run with another --run-id for the rest", file=sys.stderr)
        return 130 if code in (2, 130) else code
    if code in STOP_CODES or code > 128 or not csv_path.exists() or args.no_report:  # > 128: a build process was killed
        return code
    return _report_after_run([csv_path], Path(args.results_dir) / f"{run_id}-report", code)


def cmd_env(args: argparse.Namespace) -> int:
    import json

    from harness.device import DeviceError, resolve_device
    from harness.env import fingerprint, format_fingerprint, gpu_telemetry

    try:
        device = resolve_device(args.device)
    except DeviceError as error:
        return fail(str(error))
    from harness.energy import energy_counter

    fields = fingerprint(device)
    if device.type == "cuda":
        fields.update(gpu_telemetry(device.index or 0))
    counter, note = energy_counter(device)  # what the run's energy columns will come from
    fields["energy_source"] = counter.source if counter is not None else note
    print(json.dumps(fields, indent=2, default=str) if args.json else format_fingerprint(fields))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from reports.build import ReportError, build_report

    if not args.out:
        return fail("--out is empty — pass the report's folder (it is created if missing)")
    try:
        out = build_report(args.results, Path(args.out), args.baseline)
    except ReportError as error:
        return fail(str(error))
    except KeyboardInterrupt:
        return fail(f"interrupted: no report written ({args.out} is as it was) — run gpubench report again", code=130)
    print(f"gpubench: report -> {out}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from reports.build import ReportError
    from reports.compare import compare_paths, parse_threshold

    try:
        threshold = parse_threshold(args.threshold)
        text, code = compare_paths(args.base, args.new, threshold)
    except ReportError as error:
        return fail(str(error))
    print(text)
    return code


def tolerant_output() -> None:
    """A terminal whose encoding lacks a character gpubench prints (— ± × under a Latin-1 locale)
    gets a replacement, not a UnicodeEncodeError: compare's crash would exit 1, the 'slower' code."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="replace")


def resolve_store(args: argparse.Namespace) -> str | None:
    """--store STORE: this machine's folder in the store becomes the run's results folder, resolved
    here, on the machine that runs (harness.store). The problem, as one line, or None."""
    if getattr(args, "store", None) is None:
        return None
    from harness.env import machine_identity
    from harness.options import RESULTS_DIR_DEFAULT
    from harness.store import StoreError, others_can_remove, results_dir_for

    try:
        args.results_dir = str(results_dir_for(args.store, args.results_dir, RESULTS_DIR_DEFAULT, machine_identity))
    except StoreError as error:
        return str(error)
    removable = others_can_remove(Path(args.results_dir))
    if removable and removable[1]:  # by every user: nothing is run
        return removable[0]
    if removable:
        print(f"gpubench: warning: {removable[0]}", file=sys.stderr, flush=True)
    args.store = None  # the build processes get the resolved folder
    return None


def main(argv: list[str] | None = None) -> int:
    tolerant_output()
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command in ("run", "ab") and (problem := resolve_store(args)):
        return fail(problem, code=4)
    if args.command == "fleet":
        from harness.fleet_command import cmd_fleet

        return cmd_fleet(args, extra)
    if args.command == "run":
        return cmd_run(args, extra)
    if args.command == "ab":
        from harness.ab_command import cmd_ab

        return cmd_ab(args, extra)
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return {"env": cmd_env, "report": cmd_report, "compare": cmd_compare}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
