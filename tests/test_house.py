"""House rules that keep the library readable: modules hold one idea (at most 400 lines) and
functions fit on a screen (at most 60 lines), in harness/ and reports/."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(p for folder in ("harness", "reports") for p in (ROOT / folder).rglob("*.py"))
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 400, 60


def long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [f"{path.name}:{node.lineno} {node.name} has {node.end_lineno - node.lineno + 1} lines"
            for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]


def test_no_function_over_60_lines() -> None:
    assert [line for path in SOURCES for line in long_functions(path)] == []


def test_no_module_over_400_lines() -> None:
    sizes = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines()) for p in SOURCES}
    assert {name: lines for name, lines in sizes.items() if lines > MAX_MODULE_LINES} == {}


def test_the_rules_see_a_long_function(tmp_path: Path) -> None:
    module = tmp_path / "long.py"
    module.write_text("def f():\n" + "    x = 1\n" * 60, encoding="utf-8")
    assert long_functions(module) == ["long.py:1 f has 61 lines"]
