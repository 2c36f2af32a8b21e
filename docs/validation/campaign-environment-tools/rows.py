"""rows.py CSV...: each row's case, status, dataset and reason (cut to 160 characters), and whether every row is whole."""
import csv
import sys
for path in sys.argv[1:]:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    n = len(next(csv.reader(open(path)))) if rows else 0
    for r in rows:
        whole = None not in r and all(v is not None for v in r.values())
        print(f"{path}: {r.get('workload')}/{r.get('case_id') or r.get('case')} status={r.get('status')} "
              f"dataset={r.get('dataset')} threads={r.get('torch_threads')} whole={whole} reason={(r.get('reason') or '')[:160]!r}")
    print(f"{path}: {len(rows)} rows")
