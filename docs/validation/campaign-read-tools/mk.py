"""mk.py FOLDER RUN_ID [col=value ...] [--raw col=value@row]: one 3-build run as the harness writes it, then raw edits."""
import csv, sys
from pathlib import Path
from gpubench.harness.records.results import ResultsWriter
from gpubench.harness.records.schema import SCHEMA_VERSION

def run(folder, run_id, host="node1", mid="m1", **fields):
    folder = Path(folder); folder.mkdir(parents=True, exist_ok=True)
    w = ResultsWriter(folder, run_id)
    for b, m in enumerate((1.0e-3, 1.1e-3, 0.9e-3)):
        w.append({"schema_version": SCHEMA_VERSION, "run_id": run_id, "machine_id": mid, "hostname": host,
                  "device": "cpu", "device_name": "cpu", "timestamp_utc": "2026-11-29T12:00:00+00:00",
                  "torch_version": "2.14", "cuda_version": "", "workload": "matmul", "case_id": "matmul/fp32-n64",
                  "dtype": "fp32", "size": 64, "build": b, "builds": 3, "status": "ok", "rounds": 2,
                  "median_s": m, "min_s": m, "mean_s": m, "iqr_s": 0.0, "stddev_s": 0.0,
                  "tflops": 0.5, "samples_s": [m, m], **fields})
    w.close()
    return folder / f"{run_id}.csv"

def edit(path, column, value, at=None):
    with open(path, newline="", encoding="utf-8", errors="surrogateescape") as h:
        header, *recs = list(csv.reader(h))
    for i, r in enumerate(recs):
        if at is None or i == at:
            r[header.index(column)] = value
    with open(path, "w", newline="", encoding="utf-8", errors="surrogateescape") as h:
        csv.writer(h).writerows([header, *recs])

if __name__ == "__main__":
    folder, rid, *rest = sys.argv[1:]
    kw = dict(a.split("=", 1) for a in rest if not a.startswith("raw:"))
    p = run(folder, rid, **kw)
    for a in rest:
        if a.startswith("raw:"):
            col, val = a[4:].split("=", 1)
            edit(p, col, val.encode().decode("unicode_escape").encode("latin-1").decode("utf-8", "surrogateescape"))
