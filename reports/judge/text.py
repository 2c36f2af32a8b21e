"""Text from the files as the report reads it: every cell on one printable line (a NUL, a line
break or a bidi override in a host name reaches no table, plot or merged.csv), and a label at most
MAX_LABEL_CHARS long, still unique. What a cell says, before any renderer escapes it."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable

import pandas as pd

# C0 and C1 control characters (NUL included); tabs and line breaks become spaces first
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# Unicode's format characters (category Cf): bidi overrides make a label read backwards; zero-width
# spaces and joiners, the soft hyphen and the BOM make two different host names look alike.
INVISIBLE = re.compile(
    "[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)
# a label from the files, in a plot legend or a table cell
MAX_LABEL_CHARS = 40
LINE_BREAKS = re.compile(r"[\t\n\r\v\f\x85\u2028\u2029]+")


def plain(text: object) -> str:
    """One line of printable text: line breaks as a space, control and format characters as
    U+FFFD."""
    return INVISIBLE.sub("\ufffd", CONTROL.sub("\ufffd", LINE_BREAKS.sub(" ", str(text))))


def replace_texts(
    frame: pd.DataFrame,
    wanted: Callable[[str], bool],
    fixed: Callable[[str], str],
    skip: Iterable[str] = (),
) -> pd.DataFrame:
    """`frame` with each text cell that `wanted` picks made `fixed`: each distinct text looked at
    once, one lookup per cell (DataFrame.replace with a dict compares every cell with every key)."""
    changed = {}
    for column in frame.columns:
        # object or str
        if column in skip or not pd.api.types.is_string_dtype(frame[column].dtype):
            continue
        values = frame[column]
        dirty = {
            text: fixed(text)
            for text in values.dropna().unique()
            if isinstance(text, str) and wanted(text)
        }
        if dirty:
            changed[column] = values.mask(values.isin(dirty.keys()), values.map(dirty))
    return frame.assign(**changed) if changed else frame


def short_label(text: str, max_chars: int = MAX_LABEL_CHARS) -> str:
    """A label at most `max_chars` long: a longer one keeps its start, then an ellipsis and 6 hex
    digits of a hash of the whole, so two long labels that start alike stay two."""
    if len(text) <= max_chars:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:6]
    return f"{text[: max_chars - 7]}…{digest}"
