"""Layers import downward only, checked from the import graph (every import statement, function-
level ones included): a module may import its own layer or lower ones. reports/ sits above the
results reader and below the command line, and never imports torch."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS: dict[str, int] = {
    # pure and torch-free: statistics, planning, declarations
    "harness.stats": 0, "harness.plan": 0, "harness.columns": 0, "harness.peaks": 0, "harness.options": 0, "harness.lifetime": 0,
    "harness.workload_spec": 0, "harness.safe_files": 0, "harness.rlimits": 0, "harness.job_files": 0, "harness": 0,
    "harness.catalog": 1, "harness.profiles": 1,
    "harness.schema": 2,
    "harness.results": 3, "harness.run_ids": 3, "harness.store": 3,
    "reports": 4,  # reads results; torch-free
    # torch: devices, clocks, data, processes
    "harness.device": 5, "harness.timing": 5, "harness.env": 5, "harness.energy": 5, "harness.nvml_probe": 5, "harness.datasets": 5, "harness.data_source": 5,
    "harness.nproc": 5, "harness.cpu_memory": 5, "harness.launch": 5,
    # one measurement and its records
    "harness.cases": 6, "harness.context": 6, "harness.measure": 6, "harness.energy_columns": 6, "harness.machine_load": 6,
    "harness.terminal": 6, "harness.session": 6,
    "harness.workload": 7, "harness.runner": 7,
    "harness.workloads": 8,
    # adapters: pytest and the command line
    "harness.run_state": 9, "harness.setup": 9, "harness.fixture": 9, "harness.plugin": 9, "harness.build_main": 9,
    "harness.cli": 10, "harness.ab": 10, "harness.ab_command": 10, "harness.bench_table": 10, "harness.fleet": 10, "harness.fleet_command": 10,
}
TORCH_FREE_BELOW = 5


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in LAYERS:
            return LAYERS[prefix]
    return None


def module_name(path: Path) -> str:
    relative = path.relative_to(ROOT).with_suffix("")
    parts = list(relative.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [(node.lineno, node.module)] + [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


SOURCES = sorted(p for folder in ("harness", "reports") for p in (ROOT / folder).rglob("*.py"))


def violations(path: Path, me: str | None = None) -> list[str]:
    me = me or module_name(path)
    mine = layer_of(me)
    assert mine is not None, f"{me} has no layer: add it to LAYERS"
    bad = []
    for line, target in imports(path):
        theirs = layer_of(target)
        if theirs is not None and theirs > mine:
            bad.append(f"{me}:{line} imports {target} (layer {theirs} above {mine})")
        if mine < TORCH_FREE_BELOW and (target == "torch" or target.startswith("torch.")):
            bad.append(f"{me}:{line} imports torch in a torch-free layer")
    return bad


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_go_downward_only(path: Path) -> None:
    assert violations(path) == []


def test_the_check_sees_an_upward_import_and_torch(tmp_path: Path) -> None:
    """The guard itself: a pure module importing the plugin (inside a function) and torch is caught."""
    module = tmp_path / "stats.py"
    module.write_text("import math\n\n\ndef f():\n    from harness.plugin import STATE\n    import torch\n", encoding="utf-8")
    assert violations(module, "harness.stats") == ["harness.stats:5 imports harness.plugin (layer 9 above 0)",
                                                   "harness.stats:5 imports harness.plugin.STATE (layer 9 above 0)",
                                                   "harness.stats:6 imports torch in a torch-free layer"]
