#!/usr/bin/env bash
# `gpubench run --profile quick` from a fresh results folder with two CPU-spinning processes beside it (a shared
# machine), its console kept; the spinners stop with the run. Usage: busy-quick.sh OUT_DIR [extra gpubench args]
set -euo pipefail
out=${1:?out dir}; shift
gpubench=${GPUBENCH:-.venv/bin/gpubench}
mkdir -p "$out"
python3 -c 'while True: pass' & s1=$!
python3 -c 'while True: pass' & s2=$!
trap 'kill $s1 $s2 2>/dev/null' EXIT
sleep 2
start=$(date +%s)
set +e
$gpubench run --profile quick --results-dir "$out/results" "$@" > "$out/console.log" 2>&1
echo "exit $? wall $(( $(date +%s) - start )) s" | tee -a "$out/console.log"
