"""Which rows are a run's: those of the file that wrote it (and that file's owner), never every row
whose `run_id` column names it. In a store a team shares, a member's file can hold rows naming
another member's run (an extra build, other figures): they are not merged into that run. A run found
in several files was written by the one the results writer names after it (`<run_id>.csv`); of two
such, by the one beside the run's exit record of the same owner. A copy of that run's rows (a file
and its folder given twice, a backup) counts once; another file's rows that are no copy are left
out, in one line naming the file and its owner. Where no one file can be told the writer, each
file's rows are a run of their own, named apart, and nothing measured is lost."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pandas as pd

from gpubench.harness.core.exits import UsageError
from gpubench.reports.judge.load import RUN, joined, run_key

# What one row of a run says: a case's build and its figure. Two files holding the same of these
# hold a copy.
ROW = ["case_id", "build", "median_s"]


def owner_of(path: str) -> str:
    """The user name owning `path` ('uid N' with no account; 'unknown' when it is gone)."""
    try:
        uid = os.stat(path).st_uid
    except OSError:
        return "unknown"
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _writes_exit_record(path: Path, run_id: str) -> bool:
    """Whether `<run_id>.exit.json`, of the CSV's own owner, lies beside the CSV."""
    try:
        return os.lstat(path.with_name(f"{run_id}.exit.json")).st_uid == os.lstat(path).st_uid
    except OSError:
        return False


def writer(run_id: str, paths: list[str]) -> str | None:
    """The file among `paths` that wrote run `run_id`, or None when the files do not tell."""
    named = [p for p in paths if Path(p).stem == run_id]
    if len(named) > 1:
        named = [p for p in named if _writes_exit_record(Path(p), run_id)]
    return named[0] if len(named) == 1 else None


def _fingerprints(rows: pd.DataFrame) -> set[str]:
    """Each row's ROW as one text; an empty cell is "" (a NaN part would make the whole text NaN:
    every row alike)."""
    parts = rows[ROW].astype(object)
    return set(joined(parts.where(parts.notna(), "")))


def _split(
    frame: pd.DataFrame, rows: pd.Series, run_id: str, paths: list[str], notes: list[str]
) -> None:
    """Each file's rows of run `run_id` as a run of their own: `<run_id>@<k>`, the files in path
    order."""
    names = []
    for number, path in enumerate(paths, start=1):
        frame.loc[rows & frame["source_path"].eq(path), "run_id"] = f"{run_id}@{number}"
        names.append(f"{run_id}@{number} ({path}, owner {owner_of(path)})")
    notes.append(
        f"run {run_id} is in {len(paths)} files with other rows and none is named as its writer: "
        f"read as {len(paths)} runs, {', '.join(names)} — keep one file per run"
    )


def owned_rows(frame: pd.DataFrame, notes: list[str]) -> pd.DataFrame:
    """`frame` with each run's rows those of the file that wrote it: another file's rows of the run
    that are no copy of them are left out, one line each in `notes`; a run no one file wrote is
    split per file (`_split`)."""
    if "source_path" not in frame or frame.empty:
        return frame
    keys = run_key(frame)
    pairs = pd.DataFrame({"run": keys, "path": frame["source_path"].astype(str)}).drop_duplicates()
    shared = pairs[pairs.duplicated("run", keep=False)]
    if shared.empty:
        return frame
    frame, keep = frame.copy(), pd.Series(True, index=frame.index)
    for run, files in shared.groupby("run", sort=False)["path"]:
        rows = keys.eq(run)
        run_id, paths = str(frame.loc[rows, "run_id"].iloc[0]), sorted(files)
        by_file = {p: frame[rows & frame["source_path"].eq(p)] for p in paths}
        wrote = writer(run_id, paths)
        if wrote is None:
            prints = [_fingerprints(by_file[p]) for p in paths]
            if any(p != prints[0] for p in prints):
                _split(frame, rows, run_id, paths, notes)
            continue
        own = _fingerprints(by_file[wrote])
        for path in (p for p in paths if p != wrote and not _fingerprints(by_file[p]) <= own):
            keep &= ~(rows & frame["source_path"].eq(path))
            notes.append(
                f"{path} (owner {owner_of(path)}): {len(by_file[path])} row(s) naming run "
                f"{run_id}, which {wrote} wrote, with other builds or figures — not merged into "
                "that run: a run's rows are its own file's; move the file out if it is no run of "
                "its owner's"
            )
    return frame[keep]


def dedupe(
    frame: pd.DataFrame, left_out: list[str] | None = None
) -> tuple[pd.DataFrame, list[str]]:
    """Each run's rows from the file that wrote it (`owned_rows`), the same run given twice (a file
    and its folder, a copy) counted once. A run holding a case's build twice with other figures in
    one file is left out, named in `left_out` (a store: the rest is reported); without `left_out` it
    is refused."""
    said: list[str] = [] if left_out is None else left_out
    frame = owned_rows(frame, said)
    keys = [*RUN, "case_id", "build"]
    repeated = frame[frame.duplicated(subset=keys, keep=False)]
    by_key = repeated.groupby(keys)
    conflicting = by_key["median_s"].nunique(dropna=False)
    for key in conflicting[conflicting > 1].index:
        same = by_key.get_group(key)
        files = sorted(set(same[_file_column(same)].astype(str)))
        line = (
            f"run {same['run_id'].iloc[0]} holds {same['case_id'].iloc[0]} build "
            f"{int(same['build'].iloc[0])} twice with different figures (in {', '.join(files)}) — "
            "remove one of the rows"
        )
        if left_out is None:
            raise UsageError(line)
        left_out.append(f"{line}; the run is left out")
        frame = frame[~run_key(frame).eq(run_key(same).iloc[0])]
        if frame.empty:
            raise UsageError(line)
    duplicated = frame.duplicated(subset=keys)
    runs = ", ".join(sorted(set(frame.loc[duplicated, "run_id"])))
    notes = (
        [f"{int(duplicated.sum())} duplicate row(s) of run(s) {runs} counted once"]
        if duplicated.any()
        else []
    )
    return frame[~duplicated], (said if left_out is None else []) + notes


def _file_column(rows: pd.DataFrame) -> str:
    return "source_path" if "source_path" in rows else "source_file"
