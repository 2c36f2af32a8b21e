#!/usr/bin/env bash
# The suite's DRAM figure (the elementwise add case STREAM's rule sizes, 3 builds) and STREAM's Add kernel in C
# (2 threads, 512 MiB arrays), interleaved REPS times in the same hour. Usage: dram.sh OUT_DIR [REPS]
set -euo pipefail
out=${1:?out dir}; reps=${2:-3}
here=$(cd "$(dirname "$0")" && pwd)
gpubench=${GPUBENCH:-.venv/bin/gpubench}
mkdir -p "$out"
gcc -O3 -march=native -fopenmp "$here/stream_add.c" -o "$out/stream_add"
for rep in $(seq 1 "$reps"); do
  OMP_NUM_THREADS=$(nproc) "$out/stream_add" | tee -a "$out/stream.txt"
  $gpubench run --device cpu -k "elementwise and add" --budget none --no-report --results-dir "$out/suite" \
    --run-id "dram-$rep" > "$out/suite-$rep.log" 2>&1
done
.venv/bin/python - "$out" <<'PY'
import sys, pathlib, pandas as pd
out = pathlib.Path(sys.argv[1])
rows = pd.concat([pd.read_csv(p) for p in sorted((out / "suite").glob("*.csv"))])
dram = rows[rows.memory_tier == "dram"]
print("suite DRAM case", sorted(set(dram.case_id)), "GB/s per build", [round(x, 1) for x in dram.gbps],
      "median", round(dram.gbps.median(), 1), "best", round(dram.gbps.max(), 1))
stream = [float(line.split(", ")[1].split()[0]) for line in (out / "stream.txt").read_text().splitlines()]
print("stream add GB/s", stream, "best", max(stream))
PY
