"""The run CSVs of a results store, by machine folder, for the tests that look into a store."""

from __future__ import annotations

from pathlib import Path


def runs_in(store: Path) -> dict[str, list[Path]]:
    """machine folder name -> its run CSVs, oldest first (run ids start with the UTC time)."""
    machines: dict[str, list[Path]] = {}
    for csv in sorted(store.glob("*/*.csv")):
        if csv.is_file() and not csv.name.startswith("."):
            machines.setdefault(csv.parent.name, []).append(csv)
    return machines
