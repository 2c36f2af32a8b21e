"""`gpubench ab` and `compare` on paired sessions under the faults of
docs/validation/fault-campaign.md: signals that reach the session alone, build processes that die or
record nothing, sides that select or write elsewhere, a results folder that refuses the marker, and
paired files that are not what their names say. The builds here are tiny python processes, not
pytest: the session's logic only."""

from __future__ import annotations

import errno
import signal
import stat
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from gpubench.harness.commands import ab
from gpubench.harness.commands.ab import AbSide, run_pairs
from gpubench.harness.commands.ab_builds import side_env, side_plan
from gpubench.harness.commands.cli import main
from gpubench.harness.processes.build_main import pytest_args_of
from gpubench.harness.processes.launch import Job
from frames import write_frame
from gpubench.reports.judge.load import LABELS, load_results
from gpubench.reports.render.paired import format_session
from gpubench.reports.judge.paired import judge_logs, judge_session, paired_sides, pairing_defect

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "data" / "golden_laptop.csv"
SIDES = (AbSide("A"), AbSide("B"))


def fake_builds(
    monkeypatch: pytest.MonkeyPatch, script: str, results_dir: Path | None = None, writes: str = ""
) -> list[tuple[str, int]]:
    """Each build runs `python -c script` (SIDE and BUILD in its environment) instead of pytest; the
    first build of each side named in `writes` makes its results file, as a real one would. Returns
    the (side, build) list of the builds started."""
    started: list[tuple[str, int]] = []
    makes = (
        f"if BUILD == 0 and SIDE in {writes!r}: open({str(results_dir)!r} + '/s-' + SIDE + '.csv', "
        "'a').write('rows\\n')\n"
    )

    def job(
        side: AbSide,
        session_id: str,
        build: int,
        pairs: int,
        pytest_args: list[str],
        suite_root: Path | None = None,
        turns: str = "",
        cases: str = "",
    ) -> Job:
        started.append((side.name, build))
        argv = [
            sys.executable,
            "-c",
            f"SIDE, BUILD = {side.name!r}, {build}\n{makes if writes else ''}{script}",
        ]
        # no plan: started plainly, no fork server
        return Job(argv, side_env(side), hold_sigint=True)

    monkeypatch.setattr(ab, "side_job", job)
    return started


@pytest.mark.process
def test_sigint_to_the_session_alone_stops_it_after_the_build_in_progress(tmp_path, monkeypatch):
    # kill -INT <session pid> (not the terminal's group): the build goes on to its end, no other
    # starts
    started = fake_builds(
        monkeypatch,
        "import os, signal, time\nif (SIDE, BUILD) == ('A', 0): os.kill(os.getppid(), "
        "signal.SIGINT)\ntime.sleep(0.3)",
        tmp_path,
        "AB",
    )
    # the test process's own (the plugin's, under pytest)
    before = signal.getsignal(signal.SIGINT)
    done, stop = run_pairs(SIDES, "s", 4, [], REPO, tmp_path)
    assert started == [("A", 0)] and done == 0
    assert stop is not None and stop.code == 130 and "SIGINT received" in stop.line
    # Ctrl-C is the caller's again afterwards
    assert signal.getsignal(signal.SIGINT) is before


@pytest.mark.process
def test_a_build_killed_by_a_signal_is_named(tmp_path, monkeypatch):
    fake_builds(
        monkeypatch,
        "import os\nif (SIDE, BUILD) == ('B', 1): os.kill(os.getpid(), 9)",
        tmp_path,
        "AB",
    )
    done, stop = run_pairs(SIDES, "s", 4, [], REPO, tmp_path)
    assert done == 1 and stop is not None and stop.code == 137
    assert stop.line == "side B, build 2: the build process was killed by SIGKILL"


@pytest.mark.process
def test_a_side_that_selects_nothing_while_the_other_ran_is_a_usage_error_not_nothing_run(
    tmp_path, monkeypatch
):
    fake_builds(monkeypatch, "raise SystemExit(5 if SIDE == 'B' else 0)", tmp_path, "A")
    _done, stop = run_pairs(SIDES, "s", 4, [], REPO, tmp_path)
    assert (
        stop is not None
        and stop.code == 4
        and ("side B, build 1 selected no case while the other side ran" in stop.line)
    )
    assert "nothing was run" not in stop.line


@pytest.mark.process
def test_a_side_whose_first_build_records_nothing_stops_the_session_at_once(tmp_path, monkeypatch):
    # an --a-python without pytest (or /bin/true): every build of it would record nothing
    started = fake_builds(monkeypatch, "raise SystemExit(1 if SIDE == 'A' else 0)", tmp_path, "B")
    _done, stop = run_pairs(SIDES, "s", 4, [], REPO, tmp_path)
    assert started == [("A", 0)] and stop is not None and stop.code == 4
    assert "side A, build 1 recorded no row (exit 1)" in stop.line and "--a-python" in stop.line


def test_each_side_and_build_writes_its_own_benchmark_json_under_the_suites_config(tmp_path):
    plan = side_plan(
        AbSide("B"),
        "s",
        3,
        8,
        ["benches", "--benchmark-json", str(tmp_path / "out.json"), "--benchmark-save=base"],
        REPO,
    )
    argv = pytest_args_of(plan)
    # the build tags out.json -> out.B-b3.json (tests/test_build_protocol.py)
    assert plan.output_tag == "B-b3"
    # else an existing out.json outside the checkout: 0 cases
    assert f"--config-file={REPO / 'benches' / 'suite.ini'}" in argv


NOTHING = ["--device", "cpu", "--profile", "smoke", "--pairs", "3", "-k", "no_case_has_this_name"]


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            ["--b-arg=--gpubench-results-dir=elsewhere"],
            "--b-arg: the session sets --results-dir for both sides",
        ),
        (["--a-arg=--run-id=x"], "--a-arg: the session sets --run-id for both sides"),
        (["--builds", "5"], "a session's builds are its pairs — use --pairs 5"),
    ],
)
def test_options_the_session_owns_are_refused_before_any_build(tmp_path, capsys, extra, message):
    assert main(["ab", "--results-dir", str(tmp_path / "out"), *NOTHING, *extra]) == 4
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_a_results_dir_that_is_a_file_is_one_line_naming_the_fix(tmp_path, capsys):
    (tmp_path / "out").write_text("")
    assert main(["ab", "--results-dir", str(tmp_path / "out"), *NOTHING]) == 4
    assert "is a file, not a folder — pass a folder" in capsys.readouterr().err


def test_a_results_dir_under_a_file_is_one_line_naming_the_fix(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    assert main(["ab", "--results-dir", str(tmp_path / "file" / "out"), *NOTHING]) == 4
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1
        and "cannot be created (Not a directory) — pass a folder you can write to" in err
    )


def test_an_interpreter_named_as_on_the_command_line_is_found_on_path(monkeypatch):
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))
    assert ab.interpreter(Path(sys.executable).name, "--a-python") == str(
        Path(sys.executable).parent / Path(sys.executable).name
    )
    with pytest.raises(ValueError, match="not an executable interpreter"):
        ab.interpreter("no-such-python", "--a-python")


def test_a_marker_the_disk_refuses_is_one_line_and_exit_75(tmp_path, capsys, monkeypatch):
    def full(*args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ab, "write_marker", full)
    assert main(["ab", "--results-dir", str(tmp_path), "--run-id", "s", *NOTHING]) == 75
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the results folder is full" in err and "nothing was run" in err


@pytest.mark.process
def test_a_planted_marker_symlink_is_not_followed(tmp_path, capsys):
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    (tmp_path / "s.ab.json").symlink_to(target)
    # the link is replaced, never followed
    main(["ab", "--results-dir", str(tmp_path), "--run-id", "s", *NOTHING])
    assert target.read_text() == "keep me\n"


@pytest.mark.process
def test_a_selection_of_nothing_leaves_no_marker_behind(tmp_path, capsys):
    assert main(["ab", "--results-dir", str(tmp_path), "--run-id", "s", *NOTHING]) == 5
    assert "no case matched the selection" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def side_frame(
    run_id: str,
    builds: int,
    factor: float = 1.0,
    start: str = "2026-12-01T00:00:00",
    machine: str | None = None,
) -> pd.DataFrame:
    """A side of a session from the golden laptop run: its cases, `builds` builds, written 10 s
    apart (a side's build k at 20k s, the other's at 20k + 10 s)."""
    golden = load_results([GOLDEN]).drop(columns=list(LABELS))
    frames = []
    for build in range(builds):
        frame = golden.copy()
        frame["run_id"], frame["build"] = run_id, build
        scale = factor * (1 + 0.01 * ((build * 7) % 3))
        frame["median_s"] = frame["median_s"] * scale
        # each rate agrees with its median, as the writer derives it
        for rate in ("tflops", "gbps", "samples_per_s"):
            frame[rate] = frame[rate] / scale
        stamp = pd.Timestamp(start, tz="UTC") + pd.Timedelta(
            seconds=20 * build + (10 if run_id.endswith("-B") else 0)
        )
        frame["timestamp_utc"] = stamp.isoformat()
        frames.append(frame)
    out = pd.concat(frames, ignore_index=True)
    if machine:
        out["machine_id"] = machine
    return out


def write_session(
    folder: Path, a: pd.DataFrame, b: pd.DataFrame, session: str = "s"
) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = folder / f"{session}-A.csv", folder / f"{session}-B.csv"
    for frame, path in zip((a, b), paths):
        write_frame(frame, path, list(frame.columns))
    (folder / f"{session}.ab.json").write_text("{}\n")
    return paths


def test_a_stopped_session_keeps_its_stop_code_when_a_side_holds_only_a_header(tmp_path, capsys):
    # the disk filled during side B's first build: exit 75 (full), not 2 and "run some cases first"
    _a_path, b_path = write_session(tmp_path, side_frame("s-A", 1), side_frame("s-B", 1))
    b_path.write_text(b_path.read_text().splitlines()[0] + "\n")
    assert ab.judge_and_print(tmp_path, "s", 0.05, 75) == 75
    assert "run some cases first" not in capsys.readouterr().err


def test_cases_only_one_side_ran_are_named(tmp_path):
    a = side_frame("s-A", 3)
    b = side_frame("s-B", 3)
    b = b[b["case_id"] != "matmul/fp32-n2048"]
    text = format_session(judge_session(a, b, 0.05), 0.05)
    assert (
        "only in A: 1 case(s), not judged (matmul/fp32-n2048) — the sides selected different cases"
        in text
    )
    assert "only in B" not in text


def test_the_sessions_counts_add_up_to_its_cases_without_the_machine_wide_line():
    text = format_session(judge_session(side_frame("s-A", 3), side_frame("s-B", 3), 0.05), 0.05)
    cases = len(
        {line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| ")}
        - {"case"}
    )
    judged = (
        len(
            [
                line
                for line in text.splitlines()
                if line.startswith("| ") and "machine-wide" not in line
            ]
        )
        - 1
    )
    summary = next(line for line in text.splitlines() if line.startswith("paired session: "))
    counts = [
        int(part.split()[0]) for part in summary.split(" cases: ")[1].split(";")[0].split(", ")
    ]
    assert f": {judged} cases: " in summary and sum(counts) == judged < cases


def test_absurd_intervals_are_printed_short():
    from gpubench.reports.render.paired import factor, percent

    assert percent(2.024e9) == "over 1000%" and percent(0.853) == "85.3%"
    assert judge_logs("c", [0.0, 9.0, -9.0], 0.05).note == (
        "3 pairs; could detect only changes over 1000%: more pairs would tell"
    )
    assert factor(1.1e20) == "1.1e+20" and factor(0.808) == "0.808"


def test_a_verdict_printed_to_a_terminal_has_no_html_entities():
    """Cells are escaped for markdown, and `>` became `&gt;`: the terminal showed "could detect
    &gt;= 16%"."""
    b = side_frame("s-B", 3)
    # pairs that disagree: inconclusive
    b["median_s"] = b["median_s"] * b["build"].map({0: 1.0, 1: 1.3, 2: 0.8})
    text = format_session(judge_session(side_frame("s-A", 3), b, 0.05), 0.05)
    assert (
        "inconclusive (3 pairs" in text
        and "% or more" in text
        and "&gt;" not in text
        and "&lt;" not in text
    )


def test_compare_recognises_a_session_given_backwards_or_through_a_symlink(tmp_path):
    a_path, b_path = write_session(tmp_path, side_frame("s-A", 4), side_frame("s-B", 4, factor=1.5))
    assert paired_sides(b_path, a_path) == ("B", "A")
    (tmp_path / "link-A.csv").symlink_to(a_path)
    assert paired_sides(tmp_path / "link-A.csv", b_path) == ("A", "B")
    # A is faster than B: paired, no slowdown
    assert main(["compare", str(b_path), str(a_path)]) == 0


def test_compare_backwards_prints_the_sides_as_given(tmp_path, capsys):
    a_path, b_path = write_session(tmp_path, side_frame("s-A", 4), side_frame("s-B", 4, factor=1.5))
    main(["compare", str(b_path), str(a_path)])
    out = capsys.readouterr().out
    assert "| case | B median | A median | A/B |" in out and "paired session: 4 pairs" in out


def test_files_named_as_a_session_that_are_not_one_are_judged_unpaired_with_a_note(
    tmp_path, capsys
):
    # B copied in from a session that ran later: its builds did not alternate with A's
    a_path, b_path = write_session(
        tmp_path, side_frame("s-A", 4), side_frame("s-B", 4, start="2026-12-02T00:00:00")
    )
    assert "did not alternate" in pairing_defect(load_results([a_path]), load_results([b_path]))
    main(["compare", str(a_path), str(b_path)])
    out = capsys.readouterr().out
    assert (
        "are named as a paired session's sides, but their builds did not alternate" in out
        and "paired session:" not in out
    )


def test_a_side_from_another_machine_is_not_judged_paired(tmp_path):
    a_path, b_path = write_session(
        tmp_path, side_frame("s-A", 4), side_frame("s-B", 4, machine="bbbbbbbbbbbb")
    )
    assert "2 machines" in pairing_defect(load_results([a_path]), load_results([b_path]))
    # a real session's builds alternate
    assert pairing_defect(*(side_frame(f"s-{n}", 4) for n in "AB")) is None


@pytest.mark.process
def test_the_session_ignores_sighup_only_while_it_runs(tmp_path, monkeypatch):
    # a closed terminal: the session stops after the build in progress and judges what it has
    fake_builds(
        monkeypatch,
        "import os, signal\nif (SIDE, BUILD) == ('B', 0): os.kill(os.getppid(), signal.SIGHUP)",
        tmp_path,
        "AB",
    )
    # the test process's own (the plugin's, under pytest)
    before = signal.getsignal(signal.SIGHUP)
    done, stop = run_pairs(SIDES, "s", 4, [], REPO, tmp_path)
    assert done == 0 and stop is not None and stop.code == 129
    assert signal.getsignal(signal.SIGHUP) is before


@pytest.mark.process
def test_ctrl_c_that_ends_the_first_build_is_the_sessions_130_not_the_builds_2(
    tmp_path, monkeypatch
):
    # a terminal's Ctrl-C during side A's first build: the build exits 2 (pytest's interrupted), and
    # the session exits 130 as for every other Ctrl-C, not with the build's 2 ("stopped with exit
    # 2")
    fake_builds(
        monkeypatch, "import os, signal, sys\nos.kill(os.getppid(), signal.SIGINT)\nsys.exit(2)"
    )
    done, stop = run_pairs(SIDES, "s", 4, [], REPO, tmp_path)
    assert (
        done == 0
        and stop is not None
        and (stop.code, stop.line) == (130, "SIGINT received: stopped after side A, build 1")
    )


@pytest.mark.process
def test_a_build_stopped_longer_than_its_limit_ends_the_session_named(tmp_path, monkeypatch):
    fake_builds(
        monkeypatch,
        "import os, signal, time\nif (SIDE, BUILD) == ('B', 0): os.kill(os.getpid(), "
        "signal.SIGSTOP)\ntime.sleep(0.1)",
        tmp_path,
        "AB",
    )
    done, stop = run_pairs(SIDES, "s", 4, [], REPO, tmp_path, stopped_limit_s=1.0)
    assert done == 0 and stop is not None and stop.code == 137
    assert (
        stop.line
        == "side B, build 1 made no progress: it was stopped (state T, SIGSTOP) for 1 s: killed"
    )


@pytest.mark.process
@pytest.mark.parametrize(
    "body, message",
    [
        # stuck before Python (a lock, a prompt)
        ("exec sleep 15", "did not start Python within 1 s"),
        ("echo hello", "not a Python 3 interpreter (`"),
        # a Python 3 without the build's packages (the system's): two tracebacks from side B's build
        # after A's had run
        (
            f'exec {sys.executable} -I -S "$@"',
            "it has no torch, pytest, pytest_benchmark — pass the python of a venv",
        ),
    ],
)
def test_an_a_python_that_does_not_start_python_is_one_line_before_any_build(
    tmp_path, monkeypatch, capsys, body, message
):
    # the side's interpreter is a shell script: started once, as the session's probe
    wrapper = tmp_path / "python"
    wrapper.write_text(f"#!/bin/sh\n{body}\n")
    wrapper.chmod(0o755)
    monkeypatch.setattr(ab, "START_DEADLINE_S", 1.0, raising=False)
    started = time.monotonic()
    assert (
        main(["ab", "--results-dir", str(tmp_path / "out"), "--a-python", str(wrapper), *NOTHING])
        == 4
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and f"--a-python {wrapper}" in err, err
    assert time.monotonic() - started < 8 and not (tmp_path / "out").exists()


@pytest.mark.process
def test_an_interpreter_that_prints_a_long_banner_first_still_starts(tmp_path):
    # a wrapper (a shell script) that writes more than a pipe holds, then starts this Python
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nhead -c 200000 /dev/zero\nexec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    ab.starts_python(str(wrapper), "--a-python", 20.0)


@pytest.mark.process
def test_a_file_that_takes_a_sides_name_during_the_session_is_not_judged_as_that_side(
    tmp_path, monkeypatch
):
    # side A's first build (a tiny python) makes A's file, and a foreign s-B.csv appears before B's
    # first build
    started = fake_builds(
        monkeypatch,
        f"if SIDE == 'A': open({str(tmp_path / 's-B.csv')!r}, 'w').write('foreign\\n')",
        tmp_path,
        "A",
    )
    done, stop = run_pairs(SIDES, "s", 4, [], REPO, tmp_path)
    assert started == [("A", 0)] and done == 0 and stop is not None and stop.code == 4
    assert f"{tmp_path / 's-B.csv'} appeared before side B's first build" in stop.line


def test_a_sides_file_replaced_or_holding_another_runs_rows_is_not_judged(tmp_path, capsys):
    a_path, b_path = write_session(tmp_path, side_frame("s-A", 4), side_frame("s-B", 4))
    files = ab.SideFiles(tmp_path, "s")
    files.note("A", 0)
    files.note("B", 0)
    # another run's file put in B's place
    b_path.rename(tmp_path / "kept.csv")
    write_frame(side_frame("s-B", 4, factor=2.0), b_path, list(side_frame("s-B", 1).columns))
    assert ab.judge_and_print(tmp_path, "s", 0.05, 0, files) == 4
    err = capsys.readouterr().err
    assert "is not the file side B's builds made" in err and err.count("\n") == 1
    files.note("B", 0)
    write_frame(
        side_frame("other-run", 4), tmp_path / "other.csv", list(side_frame("s-A", 1).columns)
    )
    # another run's rows written into A's own file
    a_path.write_bytes((tmp_path / "other.csv").read_bytes())
    assert ab.judge_and_print(tmp_path, "s", 0.05, 0, files) == 4
    assert "holds rows of run 'other-run', not only side A's (s-A)" in capsys.readouterr().err


def test_side_variables_are_shown_and_kept_by_name_only(tmp_path, capsys, monkeypatch):
    # --b-env HF_TOKEN=...: the value was printed, and kept in a marker anyone could read
    monkeypatch.setattr(
        ab, "run_pairs", lambda *args, **kwargs: (0, ab.SessionStop(130, "SIGINT received"))
    )
    main(
        [
            "ab",
            "--results-dir",
            str(tmp_path),
            "--run-id",
            "s",
            "--b-env",
            "HF_TOKEN=hf_secret123",
            *NOTHING,
        ]
    )
    printed = "".join(capsys.readouterr())
    marker = tmp_path / "s.ab.json"
    assert "'HF_TOKEN': '***'" in printed and "hf_secret123" not in printed
    assert '"HF_TOKEN": "***"' in marker.read_text() and "hf_secret123" not in marker.read_text()
    assert stat.S_IMODE(marker.stat().st_mode) == 0o600


def test_a_second_session_of_one_id_is_refused_before_any_build(tmp_path, capsys, monkeypatch):
    # a session of this id runs (or ran) in this folder
    (tmp_path / "s.ab.json").write_text("{}\n")
    assert main(["ab", "--results-dir", str(tmp_path), "--run-id", "s", *NOTHING]) == 4
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1
        and "a session of this id is there already" in err
        and "pass another --run-id" in err
    )
