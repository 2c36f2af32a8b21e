"""What `gpubench run` refuses before any build, each in one line naming the fix: a results folder
no file system can name, pytest arguments its builds cannot honour (a node id, -n, --lf, -c, -p
no:benchmark, an unreadable PYTEST_ADDOPTS, pytest's form of a gpubench option), a -k/-m pytest
cannot read. Torch-free."""

from __future__ import annotations

import os
from pathlib import Path

from gpubench.harness.core.exits import UsageError
from gpubench.harness.core.pytest_args import (
    first_of,
    named_test_file,
    own_options,
    plugins_disabled,
    selections,
)


def check_results_dir(folder: str) -> None:
    """A results folder no file system can name (a component over its limit, an empty path), or a
    link: one line before any build, not a traceback after them."""
    if not folder.strip():
        raise UsageError(
            "--results-dir is empty — pass the folder the rows go to (it is created if missing)"
        )
    try:
        Path(folder, "x.csv").exists()
    # ENAMETOOLONG, ELOOP: exists() says False only for a missing file
    except OSError as error:
        raise UsageError(
            f"--results-dir {folder[:60]}…: {error.strerror} — pass a shorter folder"
            if len(folder) > 60
            else (f"--results-dir {folder}: {error.strerror} — pass another folder")
        ) from None
    # not even the run's exit record goes through it
    if Path(folder).is_symlink():
        from gpubench.harness.records.results import RESULTS_DIR, RESULTS_FIX
        from gpubench.harness.records.safe_files import link_line

        raise UsageError(link_line(Path(folder), RESULTS_DIR, RESULTS_FIX))


# pytest options a run's builds cannot honour, with the reason and the fix
REFUSED_PYTEST = {
    (
        "-n",
        "--numprocesses",
        "--dist",
    ): "pytest-xdist would time cases side by side, on cores they share; gpubench "
    "runs one process per build — drop it",
    (
        "--lf",
        "--last-failed",
        "--ff",
        "--failed-first",
    ): "a run's builds keep no pytest cache (-p no:cacheprovider) "
    "— select the cases with -k instead",
    (
        "-c",
        "--config-file",
    ): "the suite's configuration is gpubench's (benches/suite.ini) — drop it",
}


def check_pytest_args(extra: list[str]) -> None:
    """pytest arguments a run's builds cannot honour, said before any build: a test file or node id
    (the build would collect the suite beside it and time every case), -n, --lf, -c, -p
    no:benchmark, a --gpubench-* option; PYTEST_ADDOPTS likewise."""
    import shlex

    try:
        added = shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))
    except ValueError as error:
        raise UsageError(f"PYTEST_ADDOPTS cannot be read ({error}) — fix its quotes") from None
    args = [*added, *extra]
    for flags, why in REFUSED_PYTEST.items():
        if given := first_of(args, flags):
            raise UsageError(f"{given}: {why}")
    if {"benchmark", "pytest_benchmark"} & set(plugins_disabled(args)):
        raise UsageError(
            "-p no:benchmark: gpubench run times every case through pytest-benchmark — drop it"
        )
    if own := next(iter(own_options(args)), None):
        # a build reads its options from its plan: pytest's form would be read by nobody
        raise UsageError(
            f"{own} is pytest's form of a gpubench option — pass it as "
            f"{own.replace('gpubench-', '', 1)} instead"
        )
    named = named_test_file(extra)
    if named is None:
        return
    case = named.rpartition("::")[2].partition("[")[2].rstrip("]")
    hint = f"-k '{case}'" if case else "-k with part of the case's name"
    raise UsageError(
        f"{named}: gpubench run selects the suite's cases with -k/-m, not by file or node id — "
        f"use {hint} (or --tests FILE for your own tests)"
    )


def check_selection(extra: list[str]) -> None:
    """A -k or -m pytest cannot read, said before any build (not inside one, beside a warning and an
    empty results folder). pytest's expression parser is internal: where it moved, pytest says it
    itself."""
    try:
        from _pytest.mark.expression import Expression
    except ImportError:
        return
    for flag, expression in selections(extra):
        try:
            Expression.compile(expression)
        # SyntaxError in pytest 9, its own ParseError before
        except Exception as error:
            raise UsageError(
                f"{flag} {expression!r}: pytest cannot read it ({' '.join(str(error).split())}) — "
                "fix the expression"
            ) from None
