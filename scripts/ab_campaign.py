"""How often `gpubench ab` catches a real slowdown and how often it raises a false alarm, from real
sessions.

    scripts/ab-campaign run OUT [--sessions 10] [--budget 5m] [--busy] [--threads N]
                                [--scenarios aa,one-x1.10,all-x1.05]
    scripts/ab-campaign table OUT        # one markdown table of every finished session under OUT
    scripts/ab-campaign verify OUT       # the factor each injection really adds, case by case
                                         # (long fixed sessions)

Each session is `gpubench ab --device cpu --budget B -k <12 CPU micro cases>` into
OUT/<scenario>/s<i>/; side B of a slowing scenario has docs/validation/ab-campaign-tools/inject/ on
its PYTHONPATH, whose sitecustomize.py wraps torch callables (slowdown.py). A session is done when
its session.json is written: `run` skips those, so a campaign stopped halfway goes on where it
stopped. With --busy one competing busy process runs for the whole of each session; with --threads N
each session's builds run N torch threads (`gpubench ab --threads N`, the knob the noise line
names). The page: docs/validation/ab-campaign.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpubench.reports.judge.load import load_results  # noqa: E402
from gpubench.harness.core.exits import UsageError  # noqa: E402
from gpubench.reports.judge.paired import PairedSession, judge_session  # noqa: E402
from gpubench.reports.judge.verdicts import MACHINE_WIDE  # noqa: E402

INJECT = ROOT / "docs" / "validation" / "ab-campaign-tools" / "inject"
# Twelve CPU micro cases of a few milliseconds or less a call (quick profile), as `gpubench ab`
# names them.
CASES = (
    "elementwise/add-fp32-2^20",
    "elementwise/relu-fp32-2^20",
    "matmul/fp32-n512",
    "inference/mlp-bs1-grad",
    "inference/mlp-bs1-no_grad",
    "inference/mlp-bs1-inference_mode",
    "inference/cnn-bs1-grad",
    "inference/cnn-bs1-no_grad",
    "inference/cnn-bs1-inference_mode",
    "attention/fp32-fwd-math-noncausal-s64-bs4-h4-d64",
    "attention/fp32-fwd-math-causal-s64-bs4-h4-d64",
    "attention/fp32-fwd-flash-noncausal-s64-bs4-h4-d64",
)
SELECTION = (
    "((add-fp32 or relu-fp32) and 20) or fp32-n512 or mlp-bs1- or cnn-bs1- "
    "or fp32-fwd-math-noncausal-s64 or fp32-fwd-math-causal-s64 or fp32-fwd-flash-noncausal-s64"
)
# Every torch callable the twelve cases' timed calls go through (a model's forward is one call of
# Module.__call__).
EVERY_CASE_TARGETS = (
    "torch.add,torch.clamp_min,torch.matmul,torch.nn.Module.__call__,"
    "torch.nn.functional.scaled_dot_product_attention"
)
SESSION_FILE = "session.json"


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    b_env: dict[str, str] = field(default_factory=dict)
    # the cases side B slows; the others are untouched
    injected: tuple[str, ...] = ()


def slowing(targets: str, factor: str) -> dict[str, str]:
    return {
        "PYTHONPATH": str(INJECT),
        "GPUBENCH_SLOW_TARGETS": targets,
        "GPUBENCH_SLOW_FACTOR": factor,
    }


SCENARIOS = {
    s.key: s
    for s in (
        Scenario("aa", "A/A (both sides identical)"),
        Scenario(
            "one-x1.10",
            "one case x1.10 (torch.add)",
            slowing("torch.add", "1.10"),
            ("elementwise/add-fp32-2^20",),
        ),
        Scenario("all-x1.05", "every case x1.05", slowing(EVERY_CASE_TARGETS, "1.05"), CASES),
    )
}


def ab_command(
    scenario: Scenario, folder: Path, design: list[str], python: str = sys.executable
) -> list[str]:
    """The session's `gpubench ab` command line (design: `--budget 5m` or `--pairs 4 --build-seconds
    0.5`)."""
    b_env = [f"--b-env={name}={value}" for name, value in scenario.b_env.items()]
    return [
        python,
        "-m",
        "gpubench.harness.commands.cli",
        "ab",
        "--device",
        "cpu",
        *design,
        "-k",
        SELECTION,
        "--results-dir",
        str(folder),
        "--run-id",
        "ab",
        *b_env,
    ]


def scenario_folder(out: Path, key: str, busy: bool, threads: int | None = None) -> Path:
    return out / (key + ("-busy" if busy else "") + (f"-t{threads}" if threads else ""))


def start_busy() -> subprocess.Popen[bytes]:
    """One competing process that keeps a core busy until it is stopped."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)


def stop_busy(busy: subprocess.Popen[bytes] | None) -> None:
    if busy is not None:
        busy.terminate()
        busy.wait()


def run_session(
    scenario: Scenario, folder: Path, design: list[str], busy: bool, threads: int | None = None
) -> dict[str, object]:
    """One session into `folder` (made afresh: an unfinished one left by a stopped campaign is
    removed)."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    command = ab_command(
        scenario, folder, [*design, *(["--threads", str(threads)] if threads else [])]
    )
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    competitor = start_busy() if busy else None
    load_start = os.getloadavg()[0]
    started_s = time.monotonic()
    try:
        with open(folder / "ab.log", "wb") as log:
            code = subprocess.run(
                command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
            ).returncode
    finally:
        stop_busy(competitor)
    wall_s = time.monotonic() - started_s
    record = {
        "scenario": scenario.key,
        "busy": busy,
        "threads": threads,
        "exit_code": code,
        "wall_s": round(wall_s, 1),
        "load_start": load_start,
        "load_end": os.getloadavg()[0],
        "command": shlex.join(command[1:]),
    }
    (folder / SESSION_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return record


def run_campaign(
    out: Path,
    keys: list[str],
    sessions: int,
    design: list[str],
    busy: bool,
    threads: int | None = None,
) -> None:
    """Round by round, each scenario once a round (a slow hour of the machine spreads over all of
    them)."""
    for index in range(sessions):
        for key in keys:
            folder = scenario_folder(out, key, busy, threads) / f"s{index + 1:02d}"
            if (folder / SESSION_FILE).exists():
                print(f"ab-campaign: {folder} done already: skipped", flush=True)
                continue
            record = run_session(SCENARIOS[key], folder, design, busy, threads)
            print(
                f"ab-campaign: {folder}: exit {record['exit_code']}, {record['wall_s']} s, "
                f"load {record['load_start']:.2f} -> {record['load_end']:.2f}",
                flush=True,
            )


@dataclass(frozen=True)
class Outcome:
    """One finished session: what it recorded and what its verdicts say."""

    scenario: str
    busy: bool
    exit_code: int
    wall_s: float
    # the 1-minute load average, mean of the session's start and end
    load: float
    pairs: int
    # injected cases called slower
    caught: int
    # injected cases measured on both sides
    injected: int
    # untouched cases called slower, faster or broken
    flagged: int
    untouched: int
    # the machine-wide line's verdict, or "" when not judged
    machine_wide: str
    ended: str
    # the session's median over its cases of the smallest change it could detect
    detectable: float | None = None
    # the builds' torch threads when the session set them (--threads)
    threads: int | None = None


def ended_line(log: Path) -> str:
    """Why the session ended, as it said it (`gpubench ab: ended: ...`)."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    said = [
        line.split("ended: ", 1)[1] for line in lines if line.startswith("gpubench ab: ended: ")
    ]
    return said[-1] if said else ""


def judged(folder: Path) -> PairedSession | None:
    """The session's verdicts by the rule it ran under (the marker's design), or None when it
    recorded no pair."""
    marker = json.loads((folder / "ab.ab.json").read_text(encoding="utf-8"))
    try:
        a, b = (load_results([folder / f"ab-{side}.csv"]) for side in "AB")
    except (UsageError, OSError):
        return None
    return judge_session(a, b, 0.05, ("A", "B"), sequential=marker.get("design") == "sequential")


def outcome(folder: Path, record: dict[str, object], session: PairedSession | None) -> Outcome:
    """Counts one session's verdicts against what its scenario injected."""
    injected = set(SCENARIOS[str(record["scenario"])].injected)
    cases = [v for v in session.verdicts if v.case_id != MACHINE_WIDE] if session else []
    hit = [v for v in cases if v.case_id in injected]
    rest = [v for v in cases if v.case_id not in injected]
    machine = [v.verdict for v in session.verdicts if v.case_id == MACHINE_WIDE] if session else []
    load = (float(record["load_start"]) + float(record["load_end"])) / 2
    return Outcome(
        str(record["scenario"]),
        bool(record["busy"]),
        int(record["exit_code"]),
        float(record["wall_s"]),
        load,
        session.pairs if session else 0,
        sum(v.verdict == "slower" for v in hit),
        len(hit),
        sum(v.verdict in ("slower", "faster", "broken") for v in rest),
        len(rest),
        machine[0] if machine else "",
        ended_line(folder / "ab.log"),
        session.median_detectable if session else None,
        record.get("threads"),
    )


def outcomes(out: Path) -> list[Outcome]:
    """Every finished session under OUT (a folder holding session.json), in a stable order."""
    found = []
    for path in sorted(out.glob(f"*/s*/{SESSION_FILE}")):
        record = json.loads(path.read_text(encoding="utf-8"))
        found.append(outcome(path.parent, record, judged(path.parent)))
    return found


def spread(values: list[float], digits: int = 0) -> str:
    """`median (min–max)` of a column, or `—` when empty."""
    if not values:
        return "—"
    ordered = sorted(values)
    middle = (ordered[(len(ordered) - 1) // 2] + ordered[len(ordered) // 2]) / 2
    return f"{middle:.{digits}f} ({ordered[0]:.{digits}f}–{ordered[-1]:.{digits}f})"


def ratio_cell(part: int, whole: int) -> str:
    return f"{part}/{whole} ({part / whole:.0%})" if whole else "—"


def counts_cell(values: list[str]) -> str:
    """`1×9, 0×1`: each distinct value with its count, most frequent first."""
    tally: dict[str, int] = {}
    for value in values:
        tally[value] = tally.get(value, 0) + 1
    ordered = sorted(tally.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{value or 'not judged'}×{n}" for value, n in ordered)


TABLE_HEAD = (
    "| scenario | sessions | exit codes | injected cases caught | untouched cases flagged "
    "| machine-wide line | pairs per session | wall per session (s) | load average (1 min) "
    "| median detectable change (%) |\n"
    "|---|---:|---|---|---|---|---|---|---|---|"
)


def table(found: list[Outcome]) -> str:
    """One row per scenario (busy or not, --threads or not): medians with their range over the
    sessions."""
    rows = [TABLE_HEAD]
    groups: dict[tuple[str, bool, int], list[Outcome]] = {}
    for item in found:
        groups.setdefault((item.scenario, item.busy, item.threads or 0), []).append(item)
    for (key, busy, threads), items in sorted(
        groups.items(), key=lambda kv: (kv[0][1], kv[0][2], list(SCENARIOS).index(kv[0][0]))
    ):
        title = (
            SCENARIOS[key].title
            + (", one busy process" if busy else "")
            + (f", --threads {threads}" if threads else "")
        )
        rows.append(
            "| "
            + " | ".join(
                [
                    title,
                    str(len(items)),
                    counts_cell([str(i.exit_code) for i in items]),
                    ratio_cell(sum(i.caught for i in items), sum(i.injected for i in items)),
                    ratio_cell(sum(i.flagged for i in items), sum(i.untouched for i in items)),
                    counts_cell([i.machine_wide for i in items]),
                    spread([i.pairs for i in items]),
                    spread([i.wall_s for i in items]),
                    spread([i.load for i in items], 2),
                    spread([100 * i.detectable for i in items if i.detectable is not None], 1),
                ]
            )
            + " |"
        )
    return "\n".join(rows)


def session_table(found: list[Outcome]) -> str:
    """One row per session: what each one did and why it ended."""
    rows = [
        "| scenario | busy | threads | exit | pairs | caught | flagged | wall (s) | load | "
        "detectable | ended |",
        "|---|---|---:|---:|---:|---|---|---:|---:|---:|---|",
    ]
    rows += [
        f"| {i.scenario} | {'yes' if i.busy else 'no'} | {i.threads or '—'} | {i.exit_code} | "
        f"{i.pairs} | {i.caught}/{i.injected} | {i.flagged}/{i.untouched} | {i.wall_s:.0f} | "
        f"{i.load:.2f} | {'—' if i.detectable is None else f'{i.detectable:.1%}'} | "
        f"{i.ended or '—'} |"
        for i in found
    ]
    return "\n".join(rows)


def commands(out: Path, design: list[str]) -> str:
    """The exact `gpubench ab` command of each scenario, as `run` starts it (session folder s01)."""
    lines = [
        shlex.join(
            [
                "gpubench",
                *ab_command(SCENARIOS[key], scenario_folder(out, key, False) / "s01", design)[3:],
            ]
        )
        for key in SCENARIOS
    ]
    return "```bash\n" + "\n".join(lines) + "\n```"


CASE_TIMES = ROOT / "docs" / "validation" / "ab-campaign-tools" / "case_times.py"


def case_times(env_of_side: dict[str, str], seconds: float) -> dict[str, float]:
    """One fresh process's median seconds a call of each case (case_times.py:
    torch.utils.benchmark)."""
    path = os.pathsep.join([str(ROOT), env_of_side.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env = {**os.environ, **env_of_side, "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, str(CASE_TIMES), "--seconds", str(seconds)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def verify(out: Path, keys: list[str], pairs: int, seconds: float) -> None:
    """Per slowing scenario: `pairs` pairs of processes, A B, B A, ..., each timing every case; kept
    in OUT/verify/<scenario>.json (a scenario measured already is skipped)."""
    for key in keys:
        path = out / "verify" / f"{key}.json"
        if path.exists() or not SCENARIOS[key].injected:
            continue
        measured = []
        for pair in range(pairs):
            sides = [("A", {}), ("B", SCENARIOS[key].b_env)]
            times = {
                name: case_times(env, seconds)
                for name, env in (sides if pair % 2 == 0 else sides[::-1])
            }
            measured.append([times["A"], times["B"]])
            print(f"ab-campaign: verify {key}: pair {pair + 1}/{pairs} done", flush=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            json.dumps({"scenario": key, "seconds": seconds, "pairs": measured}, indent=1) + "\n"
        )


def factor_rows(key: str, measured: list[list[dict[str, float]]]) -> list[str]:
    """Per case: the intended factor, the median over the pairs of B/A, and the pairs' range."""
    rows = []
    for case_id in CASES:
        ratios = [b[case_id] / a[case_id] for a, b in measured if case_id in a and case_id in b]
        aimed = (
            SCENARIOS[key].b_env["GPUBENCH_SLOW_FACTOR"]
            if case_id in SCENARIOS[key].injected
            else "1"
        )
        rows.append(f"| {key} | {case_id} | ×{aimed} | ×{spread(ratios, 3)} | {len(ratios)} |")
    return rows


def factor_table(out: Path) -> str:
    """What each slowing scenario injected, case by case, as measured by `verify`."""
    rows = [
        "| scenario | case | intended | measured B/A: median (min–max over pairs) | pairs |",
        "|---|---|---:|---|---:|",
    ]
    for key, scenario in SCENARIOS.items():
        path = out / "verify" / f"{key}.json"
        if scenario.injected and path.exists():
            rows += factor_rows(key, json.loads(path.read_text(encoding="utf-8"))["pairs"])
        elif scenario.injected:
            rows.append(f"| {key} | (not measured: scripts/ab-campaign verify) | | | |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("action", choices=("run", "table", "verify"))
    parser.add_argument(
        "out", type=Path, help="the campaign's folder (each session in OUT/<scenario>/s<i>/)"
    )
    parser.add_argument(
        "--sessions", type=int, default=10, help="sessions of each scenario (default 10)"
    )
    parser.add_argument("--budget", default="5m", help="each session's --budget (default 5m)")
    parser.add_argument(
        "--busy",
        action="store_true",
        help="one competing busy process for the whole of each session",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads of each session's builds (gpubench ab --threads)",
    )
    parser.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help=f"comma-separated, of {', '.join(SCENARIOS)}",
    )
    parser.add_argument(
        "--pairs", type=int, default=3, help="verify: pairs of processes per scenario (default 3)"
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=0.5,
        help="verify: timed seconds per case and process (default 0.5)",
    )
    args = parser.parse_args(argv)
    keys = [key.strip() for key in args.scenarios.split(",") if key.strip()]
    unknown = [key for key in keys if key not in SCENARIOS]
    if unknown:
        parser.error(f"--scenarios {unknown[0]!r}: use some of {', '.join(SCENARIOS)}")
    design = ["--budget", args.budget]
    if args.action == "run":
        run_campaign(args.out, keys, args.sessions, design, args.busy, args.threads)
    elif args.action == "verify":
        verify(args.out, keys, args.pairs, args.seconds)
        print(factor_table(args.out))
        return 0
    found = outcomes(args.out)
    print(
        table(found)
        + "\n\n"
        + session_table(found)
        + "\n\nCommands (each session in its own folder):\n\n"
        + commands(args.out, design)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
