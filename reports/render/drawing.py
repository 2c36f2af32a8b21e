"""How the report draws: into PNG files with matplotlib's Agg, never a window. Every module of the
report that draws takes matplotlib from here, so an MPLBACKEND set for another program is not read
(a name this matplotlib does not know stopped its import with a traceback); the variable is put back
for anything else the process runs."""

from __future__ import annotations

import os

_SAVED = os.environ.pop("MPLBACKEND", None)
try:
    import matplotlib
finally:
    if _SAVED is not None:
        os.environ["MPLBACKEND"] = _SAVED
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

__all__ = ["matplotlib", "plt"]
