"""mkslow.py SRC.csv DIR: DIR/base/run.csv (the example run), DIR/new/run.csv (its matmul fp32 cases 1.5x slower, the
same run id) and DIR/new2/run.csv (the same slowdown under another run id): compare's inputs for the threshold
variants and for one run id on two sides."""
import csv
import os
import shutil
import sys

src, out = sys.argv[1], sys.argv[2]
for side in ("base", "new", "new2"):
    os.makedirs(os.path.join(out, side), exist_ok=True)
shutil.copy(src, os.path.join(out, "base", "run.csv"))
rows = list(csv.DictReader(open(src, newline="", encoding="utf-8")))
header = list(rows[0])
for row in rows:
    if row["case_id"].startswith("matmul/fp32"):
        for column in ("median_s", "min_s", "mean_s"):
            if row[column]:
                row[column] = repr(float(row[column]) * 1.5)
        if row.get("tflops"):
            row["tflops"] = repr(float(row["tflops"]) / 1.5)
for side, run_id in (("new", rows[0]["run_id"]), ("new2", "other-id")):
    with open(os.path.join(out, side, "run.csv"), "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=header, lineterminator="\r\n")
        writer.writeheader()
        writer.writerows({**row, "run_id": run_id} for row in rows)
