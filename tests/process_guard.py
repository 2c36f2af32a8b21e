"""The fast test loop's guard: under `--no-processes` (what `make check` passes), a test that starts
a Python process, forks or spawns fails at once and says to mark it `process`, so the split between
the fast loop and the full suite cannot drift. The guard is a per-test fixture: pytest-xdist's
workers, started before any test, are not affected. A started interpreter costs seconds here
(torch's import alone is about two), which is why process tests are kept out of the fast loop.

Short system programs (git, hg, file, sysctl) are allowed: the fingerprint, pytest-benchmark and
`platform` call them; they cost milliseconds."""

from __future__ import annotations

import multiprocessing.process
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# version, platform queries
CHEAP_PROGRAMS = frozenset({"git", "hg", "file", "uname", "sysctl", "lscpu", "nvidia-smi"})
MARK = "process"


class StartsProcess(BaseException):
    """A BaseException so that no `except Exception` in the code under test can swallow it."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--no-processes",
        action="store_true",
        help=f"fail any test that starts a process without the '{MARK}' mark (make check)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARK}: starts a process (an interpreter, a fork, torchrun); "
        "left out of `make check`, run by `make test`",
    )


def _program(argv: Any) -> str:
    first = argv if isinstance(argv, (str, bytes, os.PathLike)) else next(iter(argv), "")
    return Path(os.fsdecode(first).split()[0] if isinstance(argv, str) else os.fsdecode(first)).name


def _refuse(what: str) -> None:
    raise StartsProcess(
        f"this test starts a process ({what}): mark it @pytest.mark.{MARK}, "
        "or fake the launch, so that `make check` stays fast"
    )


@pytest.fixture(autouse=True)
def _no_processes(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    if not request.config.getoption("--no-processes") or request.node.get_closest_marker(MARK):
        yield
        return
    real_init = subprocess.Popen.__init__

    def guarded_init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        if _program(args) not in CHEAP_PROGRAMS:
            _refuse(f"subprocess {_program(args)!r}")
        real_init(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", guarded_init)
    monkeypatch.setattr(os, "fork", lambda: _refuse("os.fork"))
    monkeypatch.setattr(os, "posix_spawn", lambda *a, **k: _refuse("os.posix_spawn"))
    monkeypatch.setattr(
        multiprocessing.process.BaseProcess, "start", lambda self: _refuse("multiprocessing")
    )
    yield
