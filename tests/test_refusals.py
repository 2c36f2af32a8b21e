"""One refusal style (docs/architecture.md, "Words"): bad input is refused by a `check_<what>`
function that raises, whose message is the one line naming the fix; nothing returns a refusal for
its caller to raise. What is wrong with a thing, as words a check puts in its refusal, is its
`*_defect`."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(p for folder in ("harness", "reports") for p in (ROOT / folder).rglob("*.py"))


def _calls_a_check(function: ast.AST) -> bool:
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", "")
            if name.startswith("check_"):
                return True
    return False


def refusal_style_breaches(source: str) -> list[str]:
    """Functions named as a returned refusal (`*_problem`), and checks that can never refuse: no
    raise of their own and no call of another check."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if node.name.endswith("_problem"):
            found.append(f"{node.name}: a refusal is raised by a check_ function, not returned")
        raises = any(isinstance(inner, ast.Raise) for inner in ast.walk(node))
        if node.name.startswith("check_") and not raises and not _calls_a_check(node):
            found.append(f"{node.name}: a check_ function that never refuses")
    return found


def test_every_refusal_is_raised_by_a_check() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {breach}"
        for path in SOURCES
        for breach in refusal_style_breaches(path.read_text(encoding="utf-8"))
    ]
    assert not found, found


def test_the_refusal_rule_sees_a_returned_refusal_and_a_check_that_cannot_refuse() -> None:
    source = (
        "def size_problem(n):\n    return 'too big' if n > 3 else None\n"
        "def check_name(name):\n    return name.strip()\n"
        "def check_size(n):\n    if n > 3:\n        raise ValueError('too big')\n"
        "def check_all(n):\n    check_size(n)\n"
    )
    assert refusal_style_breaches(source) == [
        "size_problem: a refusal is raised by a check_ function, not returned",
        "check_name: a check_ function that never refuses",
    ]
