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


# The console object and the one screen it writes through inside pytest; every other module asks them.
CONSOLE_WRITERS = {("harness/core/console.py", None), ("harness/pytest_plugin/console.py", "ReporterScreen")}
STREAM_NAMES = {"stdout", "stderr", "__stdout__", "__stderr__"}


def console_writes(tree: ast.AST) -> list[tuple[int, str | None]]:
    """(line, enclosing class) of each print(), sys.stdout/stderr write, and terminal reporter write."""
    found: list[tuple[int, str | None]] = []

    def visit(node: ast.AST, owner: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.ClassDef) else owner
            if isinstance(child, ast.Call) and writes_to_console(child.func):
                found.append((child.lineno, owner))
            visit(child, inner)

    visit(tree, None)
    return found


def writes_to_console(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id == "print"
    if not isinstance(func, ast.Attribute):
        return False
    if func.attr in ("write_line", "write_sep"):
        return True
    target = func.value
    if func.attr == "write" and isinstance(target, ast.Attribute):
        return target.attr in STREAM_NAMES or target.attr == "_tw"
    return False


def test_every_console_line_goes_through_the_one_console() -> None:
    stray = [f"{path.relative_to(ROOT)}:{line}" for path in SOURCES
             for line, owner in console_writes(ast.parse(path.read_text()))
             if (str(path.relative_to(ROOT)), None) not in CONSOLE_WRITERS
             and (str(path.relative_to(ROOT)), owner) not in CONSOLE_WRITERS]
    assert not stray, f"console writes outside harness/core/console.py: {stray}"


def test_the_console_rule_sees_each_kind_of_write() -> None:
    source = ("import sys\nprint('x')\nsys.stderr.write('x')\nsys.stdout.write('x')\n"
              "class C:\n    def f(self, r):\n        r.write_line('x')\n        r._tw.write('x')\n")
    assert [line for line, _ in console_writes(ast.parse(source))] == [2, 3, 4, 7, 8]
