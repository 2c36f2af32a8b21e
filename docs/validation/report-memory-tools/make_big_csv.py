"""One results CSV of about SIZE_MB megabytes, for measuring the memory `gpubench report FILE` takes. Not
measurements: the template run's rows (read by gpubench.harness.records.results_reader.read_rows, so in the current schema),
written again and again as builds of runs of one machine, each figure a few % off the template's.

    python docs/validation/report-memory-tools/make_big_csv.py OUT.csv SIZE_MB [--template FILE.csv]
"""

from __future__ import annotations

import argparse
import csv
import random
from pathlib import Path
from typing import Any

from gpubench.harness.records.results_reader import read_rows
from gpubench.harness.records.schema import BY_NAME, COLUMNS, to_cell

TEMPLATE = Path(__file__).resolve().parents[3] / "reports" / "examples" / "h200" / "smoke.csv"
TIMES = {n for n, s in BY_NAME.items() if s.unit == "s" and s.kind == "float"}
RATES = {n for n, s in BY_NAME.items() if s.unit in ("TFLOP/s", "GB/s", "samples/s", "tokens/s")}


def jittered(row: dict[str, Any], factor: float) -> dict[str, Any]:
    """The row `factor` times faster: its times divided, its rates multiplied, its samples too."""
    out = dict(row)
    for column, value in row.items():
        if value is None or isinstance(value, bool):
            continue
        if column == "samples_s":
            out[column] = [v / factor for v in value]
        elif column in TIMES:
            out[column] = value / factor
        elif column in RATES:
            out[column] = value * factor
    return out


def write_big(out: Path, size_bytes: int, template: Path) -> int:
    """Runs of the template's rows into `out` until it holds `size_bytes`; the rows written."""
    rows, rng, written = read_rows(template), random.Random(7), 0
    with open(out, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        run = 0
        while handle.tell() < size_bytes:
            for row in rows:
                changed = jittered(row, rng.gauss(1.0, 0.02)) if row["status"] == "ok" else dict(row)
                changed.update(run_id=f"big-{run:05d}")
                writer.writerow([to_cell(changed.get(c)) for c in COLUMNS])
                written += 1
            run += 1
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("size_mb", type=float)
    parser.add_argument("--template", type=Path, default=TEMPLATE)
    args = parser.parse_args()
    rows = write_big(args.out, int(args.size_mb * 1e6), args.template)
    print(f"{args.out}: {args.out.stat().st_size / 1e6:.1f} MB, {rows} rows")


if __name__ == "__main__":
    main()
