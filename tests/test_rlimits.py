"""Low process limits (ulimit -n, -v, -u) never let a failure escape the row writer: `gpubench run`
stops with one line before any build, or the case becomes a failed row, or the run stops with one
line; never an INTERNALERROR or a silent abort."""

from __future__ import annotations

import resource

import pytest
from runs import gpubench_run, run_bench

from gpubench.harness.core.exits import UsageError
from gpubench.harness.processes import rlimits
from gpubench.harness.records.results_reader import read_rows

pytest_plugins = ["pytester"]
SELECTION = ("-k", "matmul and fp32 and n64", "--no-report")


def limited(kind: int, soft: int, hard: int | None = None):
    """A preexec_fn: the child starts under `kind` = (soft, hard) (hard: as it is, when None)."""

    def apply() -> None:
        resource.setrlimit(kind, (soft, resource.getrlimit(kind)[1] if hard is None else hard))

    return apply


@pytest.mark.process
@pytest.mark.parametrize(
    "kind, limit, says",
    [
        (
            resource.RLIMIT_NOFILE,
            12,
            "the open-file limit is 12 (ulimit -n); a run needs at least 64",
        ),
        (resource.RLIMIT_NOFILE, 32, "the open-file limit is 32 (ulimit -n)"),
        (
            resource.RLIMIT_AS,
            3 * 10**9,
            "torch cannot start under this shell's limits (ulimit -v 2929687)",
        ),
        # a CSV cut mid-row and pytest-benchmark's JSON refused (EFBIG: INTERNALERROR), a build
        # killed by SIGXCPU or -9
        (
            resource.RLIMIT_FSIZE,
            3072,
            "the file-size limit is 3072 bytes (ulimit -f 3); a run writes files up to 1 GiB",
        ),
        (
            resource.RLIMIT_CPU,
            6,
            "the CPU-time limit is 6 s a process (ulimit -t); a build needs at least 600 s",
        ),
    ],
    ids=["nofile-12", "nofile-32", "as-3GB", "fsize-3KiB", "cpu-6s"],
)
def test_a_tiny_limit_stops_gpubench_run_with_one_line(tmp_path, kind, limit, says):
    proc = gpubench_run(tmp_path, *SELECTION, preexec_fn=limited(kind, limit, limit))
    out, err = proc.communicate(timeout=300)
    lines = [line for line in err.splitlines() if line.strip()]
    assert (
        proc.returncode == 4 and len(lines) == 1 and says in lines[0] and "— raise" in lines[0]
    ), (proc.returncode, err[-3000:])
    assert "INTERNALERROR" not in out + err and "Traceback" not in out + err
    # refused before any build process
    assert not (tmp_path / "res").exists()


@pytest.mark.process
@pytest.mark.parametrize(
    "kind, soft",
    [
        (resource.RLIMIT_NOFILE, 32),
        (resource.RLIMIT_AS, 3 * 10**9),
        (resource.RLIMIT_FSIZE, 3072),
        (resource.RLIMIT_CPU, 6),
    ],
    ids=["nofile-32", "as-3GB", "fsize-3KiB", "cpu-6s"],
)
def test_a_low_soft_limit_is_raised_and_the_run_goes_on(tmp_path, kind, soft):
    # ulimit -S: the hard limit allows more
    proc = gpubench_run(tmp_path, *SELECTION, preexec_fn=limited(kind, soft))
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    (csv_path,) = (tmp_path / "res").glob("*.csv")
    assert [row["status"] for row in read_rows(csv_path)] == ["ok"]


def test_the_torch_probe_runs_only_under_tight_limits(monkeypatch):
    calls = []
    monkeypatch.setattr(
        rlimits, "torch_starts", lambda python=None: calls.append(python) or "bad_alloc"
    )
    monkeypatch.setattr(rlimits, "tight_limits", list)
    # an ordinary shell: no child started
    rlimits.check_limits()
    assert calls == []
    monkeypatch.setattr(rlimits, "tight_limits", lambda: ["ulimit -u 40"])
    with pytest.raises(UsageError) as refused:
        rlimits.check_limits()
    assert str(refused.value) == (
        "torch cannot start under this shell's limits (ulimit -u 40): bad_alloc — "
        "raise them (ulimit -v unlimited; ulimit -u 4096) and re-run"
    )


# A test plugin (-p nofds): no descriptor is left when the environment sidecar is written, at its
# Nth write (1: when the run opens; 2: the rewrite at the run's end), as under a tiny ulimit -n.
NO_FDS_AT_ENV = """
import errno
import os

from gpubench.harness.measurement import run_records

_write = run_records.write_sidecar
_calls = []


def write_sidecar(results_dir, run_id, suffix, payload):
    if suffix == "env":
        _calls.append(1)
        if len(_calls) == int(os.environ["NO_FDS_AT"]):
            raise OSError(errno.EMFILE, "Too many open files")
    return _write(results_dir, run_id, suffix, payload)


def pytest_configure(config):
    run_records.write_sidecar = write_sidecar


def pytest_unconfigure(config):
    # the run may be inside the test's own process: leave the module as it was
    run_records.write_sidecar = _write
"""


@pytest.mark.parametrize("at", [1, 2])
def test_no_descriptor_left_for_the_sidecar_is_one_line_not_an_internal_error(
    one_case, monkeypatch, at
):
    (one_case.path / "nofds.py").write_text(NO_FDS_AT_ENV)
    monkeypatch.setenv("NO_FDS_AT", str(at))
    result = run_bench(one_case, "-p", "nofds")
    out, err = result.stdout.str(), result.stderr.str()
    assert result.ret == 4, out[-2000:] + err[-2000:]
    assert "INTERNALERROR" not in out + err and "Traceback" not in out + err
    lines = [line for line in result.stderr.lines if line.startswith("gpubench:")]
    assert (
        len(lines) == 1
        and "Too many open files" in lines[0]
        and "— fix that, then re-run" in lines[0]
    ), lines
