"""Reports without their pixels: a matplotlib figure saved as a 1x1 PNG, not laid out nor drawn
(conftest's unrendered_plots for a test, plots_unrendered for a fixture of any scope)."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


# A valid 1x1 grey PNG: what a report test that reads tables gets in place of each drawn plot.
ONE_PIXEL_PNG = (
    b"\x89PNG\r\n\x1a\n"
    + _png_chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
    + _png_chunk(b"IDAT", zlib.compress(b"\x00\x80"))
    + _png_chunk(b"IEND", b"")
)


@contextmanager
def plots_unrendered() -> Iterator[None]:
    """Within it a matplotlib figure is saved as a 1x1 PNG without being laid out or drawn (drawing
    is about three quarters of a report's cost). The PNG is still written where and how the report
    writes it (through its safe temporary), so link and folder checks hold. For a fixture of module
    or session scope, which the per-test `unrendered_plots` does not reach."""
    import matplotlib.figure

    def save_one_pixel(self, target, *args, **kwargs):
        if hasattr(target, "write"):
            target.write(ONE_PIXEL_PNG)
        else:
            Path(target).write_bytes(ONE_PIXEL_PNG)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(matplotlib.figure.Figure, "tight_layout", lambda self, *args, **kwargs: None)
        patch.setattr(matplotlib.figure.Figure, "savefig", save_one_pixel)
        yield
