"""--benchmark-json across pytest-benchmark's versions (5.3 and later parse it to a Path, earlier
ones to a file argparse opened while parsing), and what gpubench adds to the file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpubench.harness.pytest_plugin.run_state import RunState


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
    # pytest-benchmark writes and closes it
    return path if parses_to_path() else open(path, "wb")


def add_gpubench_json(state: RunState, output_json: dict[str, Any]) -> None:
    """Serializable params (not 'UNSERIALIZABLE[MatmulCase(...)]') and the device fingerprint under
    `gpubench`."""
    from gpubench.harness.devices.env import fingerprint

    output_json["gpubench"] = dict(state.records.env or fingerprint(state.ctx.device))
    for bench in output_json.get("benchmarks", []):
        params = bench.get("params") or {}
        case = params.get("case")
        if hasattr(case, "settings"):
            params["case"] = {"workload": case.workload, "case_id": case.case_id, **case.settings()}
