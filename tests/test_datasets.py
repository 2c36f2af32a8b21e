"""The dataset files a run reads: damaged IDX files named with the fix before any case, and a data
root that cannot be written."""

import os
import tempfile

import pytest
from runs import one_error_line, run_bench, write_idx_folder

from gpubench.harness.devices.datasets import (
    IDX_FILES,
    check_dataset_files,
    idx_defect,
    usable_data_root,
)
from gpubench.harness.core.exits import UsageError

pytest_plugins = ["pytester"]


def test_a_truncated_fashion_mnist_file_is_named_with_the_fix(one_case):
    raw = one_case.path / "data" / "FashionMNIST" / "raw"
    write_idx_folder(raw, cut="train-images-idx3-ubyte")
    line = one_error_line(run_bench(one_case, "--dataset=fashion-mnist", "--data-root=data"))
    assert (
        "train-images-idx3-ubyte is truncated: 1484 bytes where its header (2x28x28) says 1584"
        in line
    )
    assert "delete it and gpubench re-extracts it from /usr/share/datasets/fashion-mnist" in line
    # nothing written
    assert [p.name for p in (one_case.path / "out").iterdir()] == ["taken.csv"]


def test_a_corrupt_mnist_file_is_named_with_the_fix(one_case):
    write_idx_folder(one_case.path / "data" / "MNIST" / "raw", bad_magic="t10k-labels-idx1-ubyte")
    line = one_error_line(run_bench(one_case, "--dataset=mnist", "--data-root=data"))
    assert (
        "t10k-labels-idx1-ubyte is not an IDX file (bad magic number)" in line
        and "re-download MNIST" in line
    )


def test_out_of_range_labels_are_named_with_the_fix_before_any_case(one_case):
    """A damaged label byte would otherwise fail the first training step with an index error."""
    write_idx_folder(
        one_case.path / "data" / "FashionMNIST" / "raw", bad_label="train-labels-idx1-ubyte"
    )
    line = one_error_line(run_bench(one_case, "--dataset=fashion-mnist", "--data-root=data"))
    assert (
        "train-labels-idx1-ubyte holds 1 label(s) outside 0..9 (the first: 200 at item 1)" in line
    )
    assert "delete it and gpubench re-extracts it" in line
    # nothing written
    assert [p.name for p in (one_case.path / "out").iterdir()] == ["taken.csv"]


def test_whole_idx_files_pass(tmp_path):
    """Whole files pass the check, for mnist and for auto (which reads MNIST here); and the pass is
    the check's verdict on these very files: a damaged one in their place is refused."""
    raw = tmp_path / "MNIST" / "raw"
    write_idx_folder(raw)
    # each file read, none has a problem
    assert {name: idx_defect(raw / name) for name in IDX_FILES} == dict.fromkeys(IDX_FILES)
    check_dataset_files("mnist", tmp_path)
    # auto reads MNIST here: checked, and whole
    check_dataset_files("auto", tmp_path)
    whole = (raw / "t10k-labels-idx1-ubyte").read_bytes()
    (raw / "t10k-labels-idx1-ubyte").write_bytes(whole[:-1])
    for name in ("mnist", "auto"):
        with pytest.raises(UsageError, match="t10k-labels-idx1-ubyte is truncated"):
            check_dataset_files(name, tmp_path)


def test_an_unwritable_data_root_falls_back_to_a_temporary_folder_with_one_warning(
    one_case, monkeypatch
):
    """The fallback folder holds its own small Fashion-MNIST (private, ours), so the test does not
    depend on Debian's dataset-fashion-mnist being installed on the machine."""
    # a file: nothing can be created below it, not even by root
    (one_case.path / "blocker").write_text("")
    monkeypatch.setenv("TMPDIR", str(one_case.path / "tmp"))
    # tempfile reads TMPDIR again (the run is in this process)
    monkeypatch.setattr(tempfile, "tempdir", None)
    fallback = one_case.path / "tmp" / f"gpubench-data-{os.getuid()}"
    write_idx_folder(fallback / "FashionMNIST" / "raw")
    for folder in (fallback / "FashionMNIST" / "raw", fallback / "FashionMNIST", fallback):
        folder.chmod(0o700)
    result = run_bench(one_case, "--dataset=fashion-mnist", "--data-root=blocker/data")
    assert result.ret == 0, result.stderr.str()
    warnings = [
        line for line in result.stderr.lines + result.stdout.lines if "WARNING: data root" in line
    ]
    assert (
        len(warnings) == 1
        and f"using {one_case.path / 'tmp'}" in warnings[0]
        and "--data-root" in warnings[0]
    )


def test_no_writable_data_root_at_all_is_one_error(tmp_path, monkeypatch):
    (tmp_path / "blocker").write_text("")
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path / "blocker"))
    with pytest.raises(
        UsageError,
        match=r"data root .* is not writable, nor is .* — pass --data-root DIR with a "
        r"writable folder",
    ):
        usable_data_root(tmp_path / "blocker" / "data", "mnist")
    # needs no files
    assert usable_data_root(tmp_path / "blocker" / "data", "synthetic") == (
        tmp_path / "blocker" / "data",
        None,
    )


@pytest.mark.skipif(os.getuid() != 0, reason="making a folder another user owns needs root")
@pytest.mark.parametrize("planted", ["another user's", "writable by all", "a link"])
def test_a_fallback_folder_planted_in_the_shared_tmp_is_never_used(tmp_path, monkeypatch, planted):
    """Anyone can make /tmp/gpubench-data-<uid> first and fill it with poisoned data (every label 0
    makes any model "accurate"): only this user's own, private folder is used."""
    shared = tmp_path / "tmp"
    shared.mkdir()
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(shared))
    fallback = shared / f"gpubench-data-{os.getuid()}"
    if planted == "a link":
        (tmp_path / "theirs").mkdir()
        fallback.symlink_to(tmp_path / "theirs")
    else:
        fallback.mkdir()
        os.chmod(fallback, 0o777)
        if planted == "another user's":
            os.chown(fallback, 12345, 12345)
    # the asked-for root cannot be made
    (tmp_path / "blocker").write_text("")
    why = {
        "another user's": "belongs to uid 12345",
        "writable by all": "can be written by other users",
        "a link": "is not a folder",
    }[planted]
    with pytest.raises(
        UsageError,
        match=rf"nor is .*gpubench-data-{os.getuid()} usable: it {why}.* — pass "
        r"--data-root DIR",
    ) as caught:
        usable_data_root(tmp_path / "blocker" / "data", "fashion-mnist")
    assert "\n" not in str(caught.value)


def test_the_fallback_folder_is_made_private(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    (tmp_path / "blocker").write_text("")
    root, warning = usable_data_root(tmp_path / "blocker" / "data", "fashion-mnist")
    assert (
        root == tmp_path / f"gpubench-data-{os.getuid()}"
        and warning
        and (root.stat().st_mode & 0o077) == 0
    )
