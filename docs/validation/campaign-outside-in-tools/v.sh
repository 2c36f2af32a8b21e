#!/bin/bash
# v.sh ID COMMAND   one variant: COMMAND under bash -c in a fresh folder /tmp/oi/v/ID (its working directory),
# killed after V_TIMEOUT s (default 120). Inside COMMAND:
#   R    /tmp/oi/v/ID/r, the variant's results folder (not made)
#   G    gpubench at the campaign's commit (the checkout's HEAD exported to $SRC, run by the shared venv)
#   PY   that venv's python (PYTHONPATH=$SRC is exported, so `$PY -m gpubench.harness.commands.cli` is G)
#   Q    --profile smoke -k matmul[fp32-n64 --budget 20s --no-report   (one case, seconds)
#   RUN  $G run $Q --results-dir $R --run-id x
#   EX   reports/examples of that commit
# Prints rc, wall, the last V_LINES lines of stdout and stderr, the widest stdout line, its \r and ESC counts,
# the files under $R with the rows of each CSV, and every process still alive that carries this variant's
# OI_VARIANT=ID in its environment (what it left running).
ID=$1; shift
export SRC=${SRC:-/tmp/oi/src} OI_VARIANT=$ID GPUBENCH_DOWNLOAD=0
export PYTHONPATH=$SRC G=/work/main/.venv/bin/gpubench PY=/work/main/.venv/bin/python
export D=/tmp/oi/v/$ID R=/tmp/oi/v/$ID/r EX=$SRC/reports/examples
export Q="--profile smoke -k matmul[fp32-n64 --budget 20s --no-report"
export RUN="$G run $Q --results-dir $R --run-id x"
rm -rf "$D"; mkdir -p "$D" /tmp/oi/logs; cd "$D" || exit 9
OUT=/tmp/oi/logs/$ID.out ERR=/tmp/oi/logs/$ID.err
t0=$(date +%s.%N)
timeout -k 5 "${V_TIMEOUT:-120}" bash -c "$*" >"$OUT" 2>"$ERR"
rc=$?
t1=$(date +%s.%N)
sleep "${V_SETTLE:-1}"; unset OI_VARIANT
echo "== $ID rc=$rc wall=$(printf %.1f "$(echo "$t1 - $t0" | bc)")s"
echo "-- stdout tail:"; grep -av '^\s*$' "$OUT" | tail -n "${V_LINES:-4}" | cut -c1-400
echo "-- stderr tail:"; grep -av '^\s*$' "$ERR" | tail -n "${V_LINES:-4}" | cut -c1-400
python3 - "$OUT" <<'PY'
import sys
b = open(sys.argv[1], "rb").read()
lines = b.split(b"\n")
cr, esc = b.count(b"\r"), b.count(b"\x1b")
print(f"-- stdout: {len(lines) - 1} lines, widest {max(map(len, lines))} bytes, CR {cr}, ESC {esc}")
PY
if [ -d "$R" ]; then
  echo "-- files:"; find "$R" -maxdepth 2 ! -path "$R" -printf '%y %s %P\n' | sort -k3 | head -${V_FILES:-12}
  for f in "$R"/*.csv; do [ -f "$f" ] && echo "   $(basename "$f"): $(($(wc -l <"$f")-1)) rows, status: $(python3 -c "import csv,sys,collections;print(dict(collections.Counter(r.get('status') for r in csv.DictReader(open(sys.argv[1])))))" "$f" 2>&1)"; done
fi
left=$(grep -las "OI_VARIANT=$ID" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 | grep -v "^$$\$" | while read -r p; do echo "$p $(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null | cut -c1-120)"; done)
echo "-- left: ${left:-none}"
