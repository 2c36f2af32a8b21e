#!/usr/bin/env bash
# Five `make bench` runs of one commit on this machine: two quiet, two beside one spinning process, one beside two.
# One fresh clone, its venv installed once (the install is no part of a run's time); results/ emptied before each
# run, so each plans with no history, as a fresh clone does. Each run's console and rows are kept in OUT.
# Usage: bench-runs.sh REPOSITORY OUT
set -u
src=${1:?the repository to clone}
out=$(realpath -m "${2:?a folder for the consoles}")
mkdir -p "$out"
work=$(mktemp -d)
git clone -q "$src" "$work/clone" && cd "$work/clone" || exit 1
make .venv/.installed data >/dev/null 2>&1 || { echo "install failed" >&2; exit 1; }
git rev-parse --short HEAD > "$out/commit.txt"
for spec in quiet-1:0 quiet-2:0 one-spinner-1:1 one-spinner-2:1 two-spinners:2; do
  name=${spec%%:*}
  spinners=${spec##*:}
  rm -rf results
  pids=()
  for _ in $(seq "$spinners"); do sh -c 'while :; do :; done' & pids+=($!); done
  start=$(date +%s)
  make bench > "$out/$name.console" 2>&1
  code=$?
  end=$(date +%s)
  [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null
  wait 2>/dev/null
  echo "$name spinners=$spinners exit=$code wall_s=$((end - start))" | tee -a "$out/runs.txt"
  cp results/*.csv "$out/$name.csv" 2>/dev/null
done
rm -rf "$work"
