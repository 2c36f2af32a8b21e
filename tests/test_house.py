"""House rules that keep the library readable: modules hold one idea and functions fit on a screen,
in harness/ and reports/.

Size is counted in logical lines (Python's statements: a call wrapped over five lines is one, a
docstring is one, blank and comment lines none), so the formatter's wrapping at 100 columns never
decides where a module splits. The limits are the old ones of 400 and 60 physical lines in the
120-column style, translated: no module then held more than 279 logical lines, no function more than
47.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(p for folder in ("harness", "reports") for p in (ROOT / folder).rglob("*.py"))
MAX_MODULE_STATEMENTS, MAX_FUNCTION_STATEMENTS = 280, 48


@functools.cache
def source_of(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@functools.cache
def tree_of(path: Path) -> ast.Module:
    """A source's tree, parsed once for all the rules here (they only read it)."""
    return ast.parse(source_of(path))


@functools.cache
def statement_rows(source: str) -> list[int]:
    """The row each logical line ends on."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [token.start[0] for token in tokens if token.type == tokenize.NEWLINE]


def long_functions(path: Path) -> list[str]:
    rows = statement_rows(source_of(path))
    found = []
    for node in ast.walk(tree_of(path)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            statements = sum(node.lineno <= row <= node.end_lineno for row in rows)
            if statements > MAX_FUNCTION_STATEMENTS:
                found.append(f"{path.name}:{node.lineno} {node.name} has {statements} statements")
    return found


def test_no_function_over_48_statements() -> None:
    assert [line for path in SOURCES for line in long_functions(path)] == []


def test_no_module_over_280_statements() -> None:
    sizes = {str(p.relative_to(ROOT)): len(statement_rows(source_of(p))) for p in SOURCES}
    assert {name: size for name, size in sizes.items() if size > MAX_MODULE_STATEMENTS} == {}


def test_the_rules_see_a_long_function(tmp_path: Path) -> None:
    module = tmp_path / "long.py"
    wrapped = "    x = f(\n        1,\n    )\n"
    module.write_text("def f():\n" + "    x = 1\n" * 47 + wrapped * 2, encoding="utf-8")
    # the def line is a statement too: 1 + 47 + 2 wrapped calls
    assert long_functions(module) == ["long.py:1 f has 50 statements"]


# The console object and the one screen it writes through inside pytest; every other module asks
# them.
CONSOLE_WRITERS = {
    ("harness/core/console.py", None),
    ("harness/pytest_plugin/console.py", "ReporterScreen"),
}
STREAM_NAMES = {"stdout", "stderr", "__stdout__", "__stderr__"}


def console_writes(tree: ast.AST) -> list[tuple[int, str | None]]:
    """(line, enclosing class) of each print(), sys.stdout/stderr write, and terminal reporter
    write."""
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
    stray = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in SOURCES
        for line, owner in console_writes(tree_of(path))
        if (str(path.relative_to(ROOT)), None) not in CONSOLE_WRITERS
        and (str(path.relative_to(ROOT)), owner) not in CONSOLE_WRITERS
    ]
    assert not stray, f"console writes outside harness/core/console.py: {stray}"


def test_the_console_rule_sees_each_kind_of_write() -> None:
    source = (
        "import sys\nprint('x')\nsys.stderr.write('x')\nsys.stdout.write('x')\n"
        "class C:\n    def f(self, r):\n        r.write_line('x')\n        r._tw.write('x')\n"
    )
    assert [line for line, _ in console_writes(ast.parse(source))] == [2, 3, 4, 7, 8]


# The reader of the user's pytest arguments, and the functions of the command line that read
# gpubench's own.
ARGUMENT_READERS = {
    ("harness/core/pytest_args.py", None),
    ("harness/commands/cli.py", "command_typo"),
    ("harness/commands/cli.py", "negative_values_joined"),
    ("harness/commands/cli.py", "long_flags"),
}


# `--`, `-k`, `--verbose`; not a lone `-` or `-_`.
FLAG = re.compile(r"--|-[A-Za-z]")


def is_flag_text(node: ast.AST) -> bool:
    if isinstance(node, ast.Tuple):
        return any(map(is_flag_text, node.elts))
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and bool(FLAG.match(node.value))
    )


def reads_a_flag(node: ast.AST) -> bool:
    """`arg.startswith("-")`, `arg == "--verbose"`, `arg[:2] in ("-k", "-m")`: a command-line token
    read."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "startswith"
    ):
        return any(map(is_flag_text, node.args))
    if isinstance(node, ast.Compare):
        return any(map(is_flag_text, [node.left, *node.comparators]))
    return False


def argument_reads(tree: ast.AST) -> list[tuple[int, str | None]]:
    found: list[tuple[int, str | None]] = []

    def visit(node: ast.AST, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = (
                child.name
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
                else function
            )
            if reads_a_flag(child):
                found.append((child.lineno, function))
            visit(child, inner)

    visit(tree, None)
    return found


def test_the_users_pytest_arguments_are_read_by_one_reader() -> None:
    stray = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in SOURCES
        for line, function in argument_reads(tree_of(path))
        if (str(path.relative_to(ROOT)), None) not in ARGUMENT_READERS
        and (str(path.relative_to(ROOT)), function) not in ARGUMENT_READERS
    ]
    assert not stray, f"command-line tokens read outside harness/core/pytest_args.py: {stray}"


def test_the_argument_rule_sees_each_way_of_reading_a_token() -> None:
    source = (
        "def f(args):\n    a = [x for x in args if x.startswith('--')]\n    b = 'x' == "
        "'--verbose'\n    c = [x for x in args if x[:2] in ('-k', '-m')]\n    d = "
        "x.startswith(('a', '-p'))\n"
    )
    assert [line for line, _ in argument_reads(ast.parse(source))] == [2, 3, 4, 5]


# Each rule's constant: the flags a row carries, the bounds of a figure and of a duration.
RULE_CONSTANTS = (
    "ONE_SAMPLE",
    "NOISY",
    "SHORT_ROUNDS",
    "THROTTLED",
    "CAPPED",
    "CACHE",
    "BUSY",
    "BUSY_GPU",
    "BUSY_FLAGS",
    "IMPOSSIBLE",
    "OVER_BUDGET_FLAG",
    "LEFT_OUT_FLAG",
    "MAX_SCALING_EFFICIENCY",
    "MAX_MFU",
    "SHORTEST_TIMED_S",
    "LONGEST_TIMED_S",
    "NOISY_REL_CI95",
    "BUSY_FRAC",
)


def module_definitions(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        for target in targets:
            elements = target.elts if isinstance(target, ast.Tuple) else [target]
            names.update(element.id for element in elements if isinstance(element, ast.Name))
    return names


def test_each_rule_is_defined_in_one_module() -> None:
    defined: dict[str, list[str]] = {name: [] for name in RULE_CONSTANTS}
    for path in SOURCES:
        for name in module_definitions(tree_of(path)) & set(RULE_CONSTANTS):
            defined[name].append(str(path.relative_to(ROOT)))
    assert {name: where for name, where in defined.items() if len(where) != 1} == {}


def test_a_flag_is_named_by_its_constant_never_by_its_text() -> None:
    from gpubench.harness.core import flags

    texts = {
        value for name, value in vars(flags).items() if name.isupper() and isinstance(value, str)
    }
    # The memory tier `cache` is a value of its own column, not the flag.
    texts.discard(flags.CACHE)
    literal = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}"
        for path in SOURCES
        if path.name != "flags.py"
        for node in ast.walk(tree_of(path))
        if isinstance(node, ast.Constant) and node.value in texts
    ]
    assert not literal, f"flags written as text outside harness/core/flags.py: {literal}"


# Pragmas for the linters and type checkers are the only comments a code line may end with.
PRAGMA = re.compile(r"#\s*(noqa|type:|pragma|fmt:)")


def end_of_line_comments(source: str) -> list[int]:
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [
        token.start[0]
        for token in tokens
        if token.type == tokenize.COMMENT
        and token.line[: token.start[1]].strip()
        and not PRAGMA.search(token.string)
    ]


def test_a_comment_sits_on_its_own_line_above_what_it_explains() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{row}"
        for path in SOURCES
        for row in end_of_line_comments(source_of(path))
    ]
    assert not found, f"comments at the end of a code line: {found[:10]}"


def test_the_comment_rule_sees_an_end_of_line_comment_and_spares_a_pragma() -> None:
    source = "x = 1  # why\n# above\ny = 2  # noqa: E501\ns = '# not a comment'\n"
    assert end_of_line_comments(source) == [1]
