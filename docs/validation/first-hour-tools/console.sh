#!/usr/bin/env bash
# The console of a user's first hour, counted: `make bench` (gpubench run --profile quick), `gpubench ab` on two cases,
# pytest-benchmark's autosave/compare tables and --benchmark-histogram without pygal. BUSY=1 starts two spinning
# processes beside each step. Usage: docs/validation/first-hour-tools/console.sh OUT_DIR   (from the checkout)
set -u
out=${1:?OUT_DIR}; mkdir -p "$out"
spin=()
if [ "${BUSY:-0}" = 1 ]; then
  for _ in 1 2; do python3 -c 'while True: pass' & spin+=($!); done
fi
trap '[ ${#spin[@]} -gt 0 ] && kill "${spin[@]}"' EXIT
count() {  # lines, lines wider than 120 columns, the widest
  awk -v name="$1" '{ n++; if (length($0) > 120) wide++; if (length($0) > max) max = length($0) }
       END { printf "%s: %d lines, %d wider than 120, widest %d\n", name, n, wide, max }' "$2"
}
make bench RESULTS="$out/bench" > "$out/make-bench.txt" 2>&1; echo "make bench exit $?" >> "$out/summary.txt"
count "make bench (after the install)" <(grep -v '^\.venv/bin/gpubench run' "$out/make-bench.txt") >> "$out/summary.txt"
.venv/bin/gpubench ab -k "matmul and n512 and (fp32 or bf16)" --results-dir "$out/ab" > "$out/ab.txt" 2>&1
echo "gpubench ab exit $?" >> "$out/summary.txt"; count "gpubench ab, two cases" "$out/ab.txt" >> "$out/summary.txt"
store="$out/benchmarks"
for i in 1 2; do
  .venv/bin/pytest benches --benchmark-only -k "matmul and n512" -p no:cacheprovider --benchmark-autosave \
    --benchmark-storage "$store" > "$out/autosave-$i.txt" 2>&1
done
.venv/bin/pytest benches --benchmark-only -k "matmul and n512" -p no:cacheprovider --benchmark-storage "$store" \
  --benchmark-compare > "$out/compare.txt" 2>&1
for f in autosave-1 autosave-2 compare; do
  echo "$f: $(grep -c '^test_matmul\[' "$out/$f.txt") table rows, $(grep -o '^test_matmul\[[^] ]*\]' "$out/$f.txt" \
    | sort -u | tr '\n' ' ')" >> "$out/summary.txt"
done
.venv/bin/python -c "import pygal" 2>/dev/null && echo "pygal is installed: histogram step not meaningful" >> "$out/summary.txt"
.venv/bin/pytest benches --benchmark-only -k "matmul and fp32 and n512" -p no:cacheprovider \
  --benchmark-histogram "$out/hist" > "$out/histogram-suite.txt" 2>&1
echo "pytest benches --benchmark-histogram without pygal: exit $?, $(wc -l < "$out/histogram-suite.txt") lines" >> "$out/summary.txt"
cat "$out/summary.txt"
