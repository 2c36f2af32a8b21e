#!/usr/bin/env bash
# The template epoch first in its build vs after other cases in the same build (headline matmul and elementwise cases
# run first), interleaved REPS times, each a fresh `gpubench run` of one build; prints epoch_s per run.
# Usage: order.sh OUT_DIR [REPS]
set -euo pipefail
out=${1:?out dir}; reps=${2:-3}
gpubench=${GPUBENCH:-.venv/bin/gpubench}
mkdir -p "$out"
for rep in $(seq 1 "$reps"); do
  for order in first after; do
    if [ "$order" = first ]; then select="guide-template"; else select="guide-template or matmul or elementwise"; fi
    $gpubench run --device cpu -k "$select" --builds 1 --budget none --no-report --results-dir "$out/$order" \
      --run-id "$order-$rep" > "$out/$order-$rep.log" 2>&1
  done
done
.venv/bin/python - "$out" <<'PY'
import sys, pathlib, pandas as pd
out = pathlib.Path(sys.argv[1])
for order in ("first", "after"):
    rows = pd.concat([pd.read_csv(p) for p in sorted((out / order).glob("*.csv"))])
    epoch = rows[rows.case_id == "mnist_epoch/guide-template"]
    print(order, "epoch_s", [round(x, 2) for x in epoch.epoch_s], "median", round(epoch.epoch_s.median(), 2),
          "busy", [round(x, 3) for x in epoch.cpu_busy_frac], "threads", sorted(set(epoch.torch_threads)))
PY
