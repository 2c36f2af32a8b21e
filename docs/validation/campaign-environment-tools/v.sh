#!/bin/bash
# v.sh N COMMAND...   run one variant under bash -c, in /tmp/camp, with a 150 s timeout (V_TIMEOUT overrides);
# stdout/stderr to /tmp/camp/logs/N.{out,err}; prints rc, wall, the last lines of each stream, the files of
# /tmp/camp/rN (the variant's results folder: $R inside COMMAND), and any process left whose command line names /tmp/camp.
N=$1; shift
export R=/tmp/camp/r$N G=${G:-/work/main/.venv/bin/gpubench} GPUBENCH_DOWNLOAD=0
export Q="--profile smoke -k matmul[fp32-n64 --no-report"
export QR="--profile smoke -k matmul[fp32-n64"
mkdir -p /tmp/camp/logs; rm -rf "$R"
cd /tmp/camp
t0=$(date +%s.%N)
timeout -k 5 "${V_TIMEOUT:-150}" bash -c "$*" >/tmp/camp/logs/$N.out 2>/tmp/camp/logs/$N.err
rc=$?
t1=$(date +%s.%N)
sleep 1
echo "== #$N rc=$rc wall=$(printf %.1f "$(echo "$t1 - $t0" | bc)")s"
echo "-- stdout tail:"; grep -v '^\s*$' /tmp/camp/logs/$N.out | tail -n "${V_LINES:-4}" | cut -c1-300
echo "-- stderr tail:"; grep -v '^\s*$' /tmp/camp/logs/$N.err | tail -n "${V_LINES:-4}" | cut -c1-300
[ -d "$R" ] && { echo "-- files:"; find "$R" -maxdepth 2 -printf '%y %s %p\n' | head -20; for f in "$R"/*.csv; do [ -f "$f" ] && echo "   $(basename "$f"): $(($(wc -l <"$f")-1)) rows"; done; }
left=$(pgrep -af 'camp' | grep -v -e pgrep -e 'v.sh' -e "$$" | grep -v '^ *[0-9]* timeout' )
echo "-- left: ${left:-none}"
