"""Installed, gpubench answers only to `gpubench.*`: a bare `harness`, `reports` or `benches` import
(or such a module name in a string: `python -m`, `-p`, importlib) would pick up a user's own module
of that name from their working folder, or fail outright in a wheel. Torch-free and quick: it reads
the sources, imports nothing."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BARE = ("harness", "reports", "benches")
FOLDERS = ("harness", "reports", "benches", "tests", "scripts")
SOURCES = sorted(
    [ROOT / "conftest.py", *(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))]
)
# a whole string that is a module name
DOTTED = re.compile(rf"(?:{'|'.join(BARE)})(?:\.\w+)+(?::\w+)?")


def is_bare(module: str) -> bool:
    return module.split(".")[0] in BARE


def bare_names(source: str, name: str = "<source>") -> list[str]:
    """Every import of a bare name, and every string constant that is one as a module name, as
    `file:line name`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if is_bare(alias.name)]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module
            and is_bare(node.module)
        ):
            found.append((node.lineno, node.module))
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and DOTTED.fullmatch(node.value)
        ):
            found.append((node.lineno, node.value))
    return [f"{name}:{line} {module}" for line, module in found]


def test_no_source_uses_a_bare_package_name() -> None:
    found = [
        hit
        for path in SOURCES
        for hit in bare_names(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]
    assert found == [], (
        "use the installed names (gpubench.harness, gpubench.reports, gpubench.benches)"
    )


def test_the_check_sees_each_form() -> None:
    # spelled apart, so the renaming codemod leaves this sample of bare names alone
    h, r = BARE[:2]
    source = (
        f"import {h}.core\nfrom {r} import units\nimport gpubench.{h}\nimport {r}lib\n"
        f"ARGV = ['-m', '{h}.commands.cli', 'see the {r}.', 'gpubench.{r}.load']\n"
    )
    assert bare_names(source) == [
        f"<source>:1 {h}.core",
        f"<source>:2 {r}",
        f"<source>:5 {h}.commands.cli",
    ]


def test_pyproject_installs_every_package_under_its_gpubench_name() -> None:
    """pyproject.toml lists the packages by hand (their installed names differ from the folders'):
    one folder missing there would be missing from every wheel, and only a wheel install would show
    it."""
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
            "packages"
        ]
    )
    on_disk = {"gpubench", "gpubench.benches", "gpubench.reports", "gpubench.harness"}
    # nested packages too (harness/workloads/common)
    for folder in ("harness", "reports"):
        on_disk |= {
            "gpubench." + ".".join(p.parent.relative_to(ROOT).parts)
            for p in (ROOT / folder).glob("*/**/__init__.py")
        }
    assert listed == on_disk
