"""No writer follows a symbolic link and no temporary has a guessable name: links
planted at every name gpubench writes leave their targets untouched; a linked output folder is one
line naming the fix; nothing is created outside the output folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from runs import run_bench

from gpubench.harness.commands.ab import write_marker
from gpubench.harness.records.results import (
    ResultsWriter,
    check_results_dir_early,
    check_run_id,
    check_writable,
    write_sidecar,
)
from gpubench.harness.core.exits import UsageError
from gpubench.harness.records.safe_files import RefusedPath, probe, replace_bytes
from gpubench.reports.render.build import build_report


pytest_plugins = ["pytester"]
EXAMPLE = Path(__file__).resolve().parent.parent / "reports" / "examples" / "cpu-2core-quick.csv"
PRECIOUS = "someone else's file\n"


def victim(tmp_path: Path, name: str = "victim") -> Path:
    """A file outside every output folder that a writer following a link would overwrite."""
    (tmp_path / "elsewhere").mkdir(exist_ok=True)
    target = tmp_path / "elsewhere" / name
    target.write_text(PRECIOUS)
    return target


def plant(link: Path, target: Path) -> Path:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    return link


def untouched(tmp_path: Path) -> bool:
    return all(p.read_bytes() == PRECIOUS.encode() for p in (tmp_path / "elsewhere").iterdir())


# reads text and files, not pixels
@pytest.mark.usefixtures("unrendered_plots")
def test_links_at_every_report_output_are_replaced_not_followed(tmp_path):
    scratch = tmp_path / "scratch"
    build_report([EXAMPLE], scratch, None)
    names = sorted(p.name for p in scratch.iterdir())
    assert {"merged.csv", "report.md", "matmul_tflops.png"} <= set(names)
    out = tmp_path / "out"
    # every output
    for name in names:
        plant(out / name, victim(tmp_path, name))
    build_report([EXAMPLE], out, None)
    assert untouched(tmp_path)
    # written beside the links' targets
    assert all(not (out / name).is_symlink() and (out / name).stat().st_size > 0 for name in names)
    assert (out / "report.md").read_text().startswith("# gpubench report")
    # no temporary left
    assert sorted(p.name for p in out.iterdir()) == names
    # nor beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "out", "scratch"]


def test_a_linked_report_folder_is_one_line(tmp_path):
    (tmp_path / "real").mkdir()
    plant(tmp_path / "out", tmp_path / "real")
    with pytest.raises(
        UsageError,
        match=r"out is a symbolic link \(to .*real\).* — pass --out with the folder itself",
    ) as caught:
        build_report([EXAMPLE], tmp_path / "out", None)
    assert "\n" not in str(caught.value) and list((tmp_path / "real").iterdir()) == []


def test_a_link_at_the_runs_file_is_refused_dangling_or_not(tmp_path):
    plant(tmp_path / "dangling.csv", tmp_path / "nowhere.csv")
    plant(tmp_path / "linked.csv", victim(tmp_path))
    for run_id in ("dangling", "linked"):
        for appending in (False, True):
            with pytest.raises(
                UsageError,
                match=rf"{run_id}\.csv is a symbolic link .*not a results file — remove it "
                r"or pass another --run-id",
            ):
                check_run_id(run_id, tmp_path, appending=appending)
        # the writer itself, should a link appear after the check
        for resume in (False, True):
            with pytest.raises(RefusedPath, match="results file .* is a symbolic link"):
                ResultsWriter(tmp_path, run_id, resume=resume)
    assert untouched(tmp_path) and not (tmp_path / "nowhere.csv").exists()


def test_a_dangling_link_at_the_runs_file_is_named_as_one(one_case):
    plant(one_case.path / "out" / "mine.csv", one_case.path / "nowhere.csv")
    result = run_bench(one_case, "--run-id=mine", "--gpubench-build=0")
    assert result.ret == 4
    error = result.stderr.str()
    assert (
        "mine.csv is a symbolic link" in error
        and "another run" not in error
        and "Traceback" not in error
    )
    assert not (one_case.path / "nowhere.csv").exists()


def test_sidecars_replace_links_at_their_names_and_the_ab_marker_refuses_them(tmp_path):
    names = [
        "run.env.json",
        "run.ops.json",
        "s.ab.json",
        f".run.env.json.partial-{os.getpid()}",
        f".run.ops.json.partial-{os.getpid()}",
    ]
    # the final names, and the temporaries' old pid-predictable names
    for name in names:
        plant(tmp_path / name, victim(tmp_path, name))
    write_sidecar(tmp_path, "run", "env", {"a": 1})
    write_sidecar(tmp_path, "run", "ops", {"b": 2})
    # the marker is made new (the session's name is its own)
    with pytest.raises(RefusedPath, match="is a symbolic link"):
        write_marker(tmp_path, "s", (), 3)
    assert untouched(tmp_path)
    assert (
        json.loads((tmp_path / "run.env.json").read_text()) == {"a": 1}
        and not (tmp_path / "run.env.json").is_symlink()
    )
    (tmp_path / "s.ab.json").unlink()
    write_marker(tmp_path, "s", (), 3)
    assert json.loads((tmp_path / "s.ab.json").read_text())["pairs_planned"] == 3


def test_the_write_probes_never_follow_a_link_and_create_nothing_outside(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    # the old probe's pid-predictable name
    plant(results / f".gpubench-write-test-{os.getpid()}", victim(tmp_path, "probe"))
    check_writable(results)
    # the only writable ancestor of a results folder that does not exist yet (like /tmp)
    shared = tmp_path / "shared"
    shared.mkdir()
    plant(shared / f".gpubench-write-test-{os.getpid()}", victim(tmp_path, "shared-probe"))
    before = sorted(os.listdir(shared))
    check_results_dir_early(shared / "a" / "b")
    # nothing made there, not even for a moment
    assert untouched(tmp_path) and sorted(os.listdir(shared)) == before
    # the probe's own file is gone
    assert sorted(os.listdir(results)) == [f".gpubench-write-test-{os.getpid()}"]


def test_a_linked_results_folder_is_refused(tmp_path):
    (tmp_path / "real").mkdir()
    plant(tmp_path / "results", tmp_path / "real")
    for check in (check_writable, check_results_dir_early):
        with pytest.raises(
            RefusedPath,
            match=r"results directory .*results.* is a symbolic link .* — pass "
            r"--results-dir with the folder itself",
        ):
            check(tmp_path / "results")
    for write in (
        lambda: write_sidecar(tmp_path / "results", "run", "env", {}),
        lambda: probe(tmp_path / "results", "results directory", "fix"),
    ):
        # a folder swapped for a link after the checks
        with pytest.raises(RefusedPath, match="is a symbolic link"):
            write()
    assert list((tmp_path / "real").iterdir()) == []


def test_a_failed_replacement_leaves_the_old_file_and_no_temporary(tmp_path):
    replace_bytes(tmp_path, "f", b"old", "folder", "fix")
    with pytest.raises(ZeroDivisionError):
        from gpubench.harness.records.safe_files import replacing

        with replacing(tmp_path, "f", "folder", "fix") as handle:
            handle.write(b"half")
            raise ZeroDivisionError
    assert (tmp_path / "f").read_bytes() == b"old" and os.listdir(tmp_path) == ["f"]
