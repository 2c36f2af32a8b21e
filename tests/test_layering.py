"""Layers import downward only, checked from the import graph (every import statement, function-
level ones included): a module may import its own layer or lower ones. reports/ sits above the
results reader and below the command line, and never imports torch."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The layers, lowest first: each is a package, and a module's layer is its package's. A package may
# import its own layer or lower ones; the first six never import torch.
PACKAGES: tuple[str, ...] = (
    # pure and torch-free: statistics, round plans, declarations, peaks, the option table
    "gpubench.harness.core",
    # the run's time: its deadline, prices, shares, plan and promise; no torch, no pytest
    "gpubench.harness.budget",
    # the workload catalogue and the profiles
    "gpubench.harness.catalog",
    # schema, results, run ids, store, safe files, fleet job files
    "gpubench.harness.records",
    # reads results and decides: rows, labels, busy, noise, verdicts, health; torch-free
    "gpubench.reports.judge",
    # draws what the judge decided: markdown, plots, console lines, the report folder; torch-free
    "gpubench.reports.render",
    # launchers, lifetime, limits, the build entry; torch-free
    "gpubench.harness.processes",
    # torch from here: devices, fingerprint, energy, data
    "gpubench.harness.devices",
    # the clock, the round loop, cases, the session, the runner
    "gpubench.harness.measurement",
    "gpubench.harness.workloads",
    "gpubench.harness.pytest_plugin",
    "gpubench.harness.commands",
)
LAYERS: dict[str, int] = {
    "gpubench.harness": 0,
    # the package's own __init__ (a docstring): the lower of its two layers
    "gpubench.reports": PACKAGES.index("gpubench.reports.judge"),
    **{package: layer for layer, package in enumerate(PACKAGES)},
}
TORCH_FREE_BELOW = PACKAGES.index("gpubench.harness.devices")


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
    # its installed name
    return "gpubench." + ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [(node.lineno, node.module)] + [
                (node.lineno, f"{node.module}.{alias.name}") for alias in node.names
            ]
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
    """The guard itself: a pure module importing the plugin (inside a function) and torch is
    caught."""
    module = tmp_path / "stats.py"
    module.write_text(
        "import math\n\n\ndef f():\n    from gpubench.harness.pytest_plugin.plugin import STATE\n "
        "   import torch\n",
        encoding="utf-8",
    )
    assert violations(module, "gpubench.harness.core.stats") == [
        "gpubench.harness.core.stats:5 imports gpubench.harness.pytest_plugin.plugin (layer 10 "
        "above 0)",
        "gpubench.harness.core.stats:5 imports gpubench.harness.pytest_plugin.plugin.STATE (layer "
        "10 above 0)",
        "gpubench.harness.core.stats:6 imports torch in a torch-free layer",
    ]


BUDGET = ROOT / "harness" / "budget"


def framework_imports(paths: list[Path]) -> list[str]:
    """Imports of torch or pytest (function-level ones included) in `paths`."""
    return [
        f"{path.name}:{line} imports {target}"
        for path in paths
        for line, target in imports(path)
        if target.split(".")[0] in ("torch", "pytest", "_pytest")
    ]


def test_the_budget_package_imports_neither_torch_nor_pytest(tmp_path: Path) -> None:
    """The run's time is decided where neither a device nor the test runner is: the check sees one
    that is."""
    assert framework_imports(sorted(BUDGET.glob("*.py"))) == []
    planted = tmp_path / "plan.py"
    planted.write_text("def f():\n    import pytest\n", encoding="utf-8")
    assert framework_imports([planted]) == ["plan.py:2 imports pytest"]


def test_every_module_lives_in_a_layer_package() -> None:
    """The tree shows the layers: no flat module beside the packages, no package the map leaves
    out."""
    flat = sorted(
        str(p.relative_to(ROOT))
        for folder in ("harness", "reports")
        for p in (ROOT / folder).glob("*.py")
        if p.name != "__init__.py"
    )
    assert flat == [], f"modules outside a layer package: {flat}"
    on_disk = {
        f"gpubench.{folder}.{p.name}"
        for folder in ("harness", "reports")
        for p in (ROOT / folder).iterdir()
        if (p / "__init__.py").exists()
    }
    assert on_disk == set(PACKAGES)


def test_the_architecture_page_draws_the_same_map() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = [
        line for line in page.splitlines() if line.startswith("| ") and "`" in line.split("|")[2]
    ]
    drawn = [
        "gpubench." + line.split("|")[2].strip().strip("`").rstrip("/").replace("/", ".")
        for line in rows
    ]
    assert drawn == list(PACKAGES)


def module_graph() -> dict[str, set[str]]:
    names = {module_name(p) for p in SOURCES}
    graph: dict[str, set[str]] = {}
    for path in SOURCES:
        targets = {target for _, target in imports(path)}
        graph[module_name(path)] = {t for t in targets if t in names and t != module_name(path)}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circle() -> None:
    """Function-level imports count too: a circle hidden inside a function is still a circle."""
    assert cycles(module_graph()) == []


def test_the_circle_check_sees_a_circle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


WORKLOAD_PREFIX = "gpubench.harness.workloads."


def sibling_imports(path: Path, me: str | None = None) -> list[str]:
    """A workload module's imports of another workload: what they share lives in workloads/common/,
    and a torchrun worker (`<workload>_worker`) may import its own workload only; common imports
    none."""
    me = me or module_name(path)
    mine = me.removeprefix(WORKLOAD_PREFIX).split(".")[0]
    allowed = {"common"} | ({mine.removesuffix("_worker"), mine} if mine != "common" else set())
    return [
        f"{me}:{line} imports {target}"
        for line, target in imports(path)
        if target.startswith(WORKLOAD_PREFIX)
        and target.removeprefix(WORKLOAD_PREFIX).split(".")[0] not in allowed
    ]


@pytest.mark.parametrize(
    "path",
    sorted((ROOT / "harness" / "workloads").rglob("*.py")),
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_a_workload_imports_no_siblings_internals(path: Path) -> None:
    assert sibling_imports(path) == []


def test_the_check_sees_a_sibling_import(tmp_path: Path) -> None:
    module = tmp_path / "time_to_accuracy.py"
    module.write_text(
        "from gpubench.harness.workloads.mnist_epoch import EpochCase\n"
        "from gpubench.harness.workloads.common.epoch import TEMPLATE\n",
        encoding="utf-8",
    )
    assert sibling_imports(module, "gpubench.harness.workloads.time_to_accuracy") == [
        "gpubench.harness.workloads.time_to_accuracy:1 imports "
        "gpubench.harness.workloads.mnist_epoch",
        "gpubench.harness.workloads.time_to_accuracy:1 imports "
        "gpubench.harness.workloads.mnist_epoch.EpochCase",
    ]
    assert sibling_imports(module, "gpubench.harness.workloads.common.epoch")[0].endswith(
        "imports gpubench.harness.workloads.mnist_epoch"
    )


# The judge decides, the renderers draw what it decided (docs/architecture.md, "Who decides what").
JUDGE, RENDER = ROOT / "reports" / "judge", ROOT / "reports" / "render"
# What a renderer may import from the harness besides the judge: declarations and data it shows
# (columns, workloads' sections and plots, datasheet peaks), how a value is written (a share, a
# duration), the console, the one usage error and safe file writing. Never a rule: flags, bounds,
# statistics, the store or the reader.
RENDER_MAY_IMPORT = (
    "gpubench.harness.catalog",
    "gpubench.harness.core.console",
    "gpubench.harness.core.duration_text",
    "gpubench.harness.core.exits",
    "gpubench.harness.core.peaks",
    "gpubench.harness.core.percent",
    "gpubench.harness.core.workload_spec",
    "gpubench.harness.records.safe_files",
    "gpubench.harness.records.schema",
)
# What the commands may take from the renderers: entry points that render what the judge decided
# (the report, compare's text, an A/B session's table, the noise line, a run's last lines, a table).
# A decision (a verdict, an exit code, which rows count) is asked of the judge.
COMMANDS_MAY_RENDER = {
    "build_report",
    "closing_lines",
    "compare_paths",
    "format_session",
    "md_table",
    "noise_line",
}


def judge_imports_render(path: Path) -> list[str]:
    return [
        f"{path.name}:{line} imports {target}"
        for line, target in imports(path)
        if target.startswith("gpubench.reports.render")
    ]


def render_imports_a_rule(path: Path) -> list[str]:
    """A renderer's imports of anything that decides, outside the judge: the harness beyond
    RENDER_MAY_IMPORT, or a reports module in neither package."""
    bad = []
    for line, target in imports(path):
        reports = target.startswith("gpubench.reports.") and not target.startswith(
            ("gpubench.reports.judge", "gpubench.reports.render")
        )
        harness = target.startswith("gpubench.harness") and not any(
            target == allowed or target.startswith(allowed + ".") for allowed in RENDER_MAY_IMPORT
        )
        if reports or harness:
            bad.append(f"{path.name}:{line} imports {target}")
    return bad


def commands_rendering(path: Path) -> list[str]:
    """What a command takes from the renderers beyond COMMANDS_MAY_RENDER; a whole renderer module
    is never taken (its every name would be in reach)."""
    bad = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "gpubench.reports.render"
        ):
            module = node.module or ""
            bad += [
                f"{path.name}:{node.lineno} takes {module}.{alias.name}"
                for alias in node.names
                if alias.name not in COMMANDS_MAY_RENDER or module == "gpubench.reports.render"
            ]
        elif isinstance(node, ast.Import):
            bad += [
                f"{path.name}:{node.lineno} takes {alias.name}"
                for alias in node.names
                if alias.name.startswith("gpubench.reports.render")
            ]
    return bad


@pytest.mark.parametrize("path", sorted(JUDGE.glob("*.py")), ids=lambda p: p.name)
def test_the_judge_never_imports_a_renderer(path: Path) -> None:
    assert judge_imports_render(path) == []


@pytest.mark.parametrize("path", sorted(RENDER.glob("*.py")), ids=lambda p: p.name)
def test_a_renderer_takes_its_decisions_from_the_judge_alone(path: Path) -> None:
    assert render_imports_a_rule(path) == []


@pytest.mark.parametrize(
    "path", sorted((ROOT / "harness" / "commands").glob("*.py")), ids=lambda p: p.name
)
def test_the_commands_ask_the_renderers_only_to_render(path: Path) -> None:
    assert commands_rendering(path) == []


def test_the_judge_and_render_checks_see_what_they_guard(tmp_path: Path) -> None:
    planted = tmp_path / "verdicts.py"
    planted.write_text(
        "def f():\n    from gpubench.reports.render.markdown import escape\n", encoding="utf-8"
    )
    assert judge_imports_render(planted) == [
        "verdicts.py:2 imports gpubench.reports.render.markdown",
        "verdicts.py:2 imports gpubench.reports.render.markdown.escape",
    ]
    planted = tmp_path / "summary.py"
    planted.write_text(
        "from gpubench.harness.core.flags import BUSY\n"
        "from gpubench.harness.core.percent import percent\n"
        "from gpubench.reports.judge.settled import busy_only\n",
        encoding="utf-8",
    )
    assert render_imports_a_rule(planted) == [
        "summary.py:1 imports gpubench.harness.core.flags",
        "summary.py:1 imports gpubench.harness.core.flags.BUSY",
    ]
    planted = tmp_path / "ab.py"
    planted.write_text(
        "from gpubench.reports.render.paired import format_session, percent\n"
        "from gpubench.reports.render import build\n"
        "import gpubench.reports.render.units\n",
        encoding="utf-8",
    )
    assert commands_rendering(planted) == [
        "ab.py:1 takes gpubench.reports.render.paired.percent",
        "ab.py:2 takes gpubench.reports.render.build",
        "ab.py:3 takes gpubench.reports.render.units",
    ]
