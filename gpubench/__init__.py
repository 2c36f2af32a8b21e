"""gpubench, under one import name: `gpubench.harness` (the library, the pytest plugin and the
command line), `gpubench.reports` (the report builder) and `gpubench.benches` (the suite's bench
modules). The generic names stay inside this package, so a user's own `harness` or `reports` module
neither shadows them nor is shadowed.

An installed wheel holds the three as real subpackages of this folder. A source checkout keeps them
as the repository's top-level folders beside this one: there the package's search path also covers
the repository root, so `gpubench.harness` is the checkout's `harness/` (tests, `python -m`,
PYTHONPATH=checkout).

A build process imports gpubench before pytest starts, so pytest cannot rewrite this package's
asserts and warns that it cannot, which `-W error` makes fatal to every build; this marker tells
pytest to leave the package alone: PYTEST_DONT_REWRITE"""

from __future__ import annotations

from pathlib import Path

SUBPACKAGES = ("harness", "reports", "benches")
_HERE = Path(__file__).resolve().parent
_ABOVE = _HERE.parent


def _is_checkout(root: Path) -> bool:
    """The repository root: its pyproject.toml beside the three folders, none of them inside this
    package."""
    inside = any((_HERE / name).is_dir() for name in SUBPACKAGES)
    return (
        not inside
        and (root / "pyproject.toml").is_file()
        and all((root / name).is_dir() for name in SUBPACKAGES)
    )


# The checkout's root, where the suite's own git history and pyproject.toml live; None in an
# installed wheel.
CHECKOUT: Path | None = _ABOVE if _is_checkout(_ABOVE) else None
# The folder that holds the importable `gpubench` package: what a child process needs on its
# PYTHONPATH.
IMPORT_ROOT: Path = _ABOVE
if CHECKOUT is not None:
    __path__.append(str(CHECKOUT))  # noqa: F821 - a package's module search path, set by the import system
