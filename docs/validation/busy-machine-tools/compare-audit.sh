#!/usr/bin/env bash
# compare on a quiet and on a busy machine: six quick runs of the CPU micro cases each (quiet, then beside two
# spinning processes), the power audit over each folder, and a user's own case made 2x slower against a busy BASE
# and with a busy NEW. Usage: compare-audit.sh OUT_DIR
set -uo pipefail
out=${1:?out dir}
gpubench=${GPUBENCH:-.venv/bin/gpubench}
sel=(-k "matmul or elementwise or inference or conv2d" --budget none)  # the profile's 3 builds, no extra ones
mkdir -p "$out"
spin() { python3 -c 'while True: pass' & s1=$!; python3 -c 'while True: pass' & s2=$!; sleep 1; }
unspin() { kill "$s1" "$s2"; wait "$s1" "$s2" 2>/dev/null; }
for i in 1 2 3 4 5 6; do $gpubench run --device cpu --profile quick --no-report "${sel[@]}" --results-dir "$out/quiet" \
  > "$out/quiet-$i.log" 2>&1; done
.venv/bin/python scripts/power-audit --runs "$out/quiet" > "$out/audit-quiet.md" 2>&1
spin
for i in 1 2 3 4 5 6; do $gpubench run --device cpu --profile quick --no-report "${sel[@]}" --results-dir "$out/busy" \
  > "$out/busy-$i.log" 2>&1; done
unspin
.venv/bin/python scripts/power-audit --runs "$out/busy" > "$out/audit-busy.md" 2>&1
mkdir -p "$out/own"
printf 'import os\n\n\ndef test_step(gpubench):\n    n = 200_000 * int(os.environ.get("WORK", "1"))\n    gpubench.measure(lambda: sum(range(n)), name="mine/sum")\n' > "$out/own/test_own.py"
own() { $gpubench run --device cpu --profile quick --budget none --no-report --tests "$out/own/test_own.py" --results-dir "$out/own-res" --run-id "$1" > "$out/own-$1.log" 2>&1; }
spin; own base-busy; unspin
own base-quiet
WORK=2 own new-quiet
spin; WORK=2 own new-busy; unspin
for pair in "base-busy new-quiet" "base-quiet new-busy" "base-busy new-busy" "base-quiet new-quiet"; do
  set -- $pair
  $gpubench compare "$out/own-res/$1.csv" "$out/own-res/$2.csv" > "$out/compare-$1-$2.txt" 2>&1
  echo "compare $1 -> $2 (2x slower): exit $?" | tee -a "$out/own-verdicts.txt"
done
