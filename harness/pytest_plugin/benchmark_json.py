"""--benchmark-json across pytest-benchmark's versions: 5.3 and later parse it to a Path; earlier ones to a
file that argparse opened for writing while it parsed (and refuses itself, with its own usage line, when
it cannot open it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def parses_to_path() -> bool:
    from pytest_benchmark import __version__

    major, minor = (int(part) for part in __version__.split(".")[:2])
    return (major, minor) >= (5, 3)


def json_path(value: Any) -> Path | None:
    """The option's parsed value as a path; None when it was not given."""
    if not value:
        return None
    return Path(value if isinstance(value, (str, os.PathLike)) else value.name)


def json_value(path: Path) -> Any:
    """What the option holds for `path` in the pytest-benchmark installed."""
    return path if parses_to_path() else open(path, "wb")  # noqa: SIM115 - pytest-benchmark writes and closes it
