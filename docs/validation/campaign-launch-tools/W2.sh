# a local fleet stopped (SIGSTOP), then killed with -9 while stopped: its job stops within seconds, rows whole
. "$(dirname "$0")/common.sh"; mkdir -m 700 $W/home
"${FL[@]}" --builds 100 --store $W/S --jobs-dir $W/home/jobs > $W/log 2>&1 & F=$!
until grep -q running $W/log 2>/dev/null; do sleep 0.2; done; sleep 6; kill -STOP $F; sleep 2; kill -9 $F; K=$SECONDS
while pgrep -f "gpubench.harness.commands.cli run --store $W/S" >/dev/null; do sleep 0.5; [ $((SECONDS-K)) -gt 60 ] && break; done
echo "job's run gone $((SECONDS-K)) s after the kill"; grep -h "has ended\|interrupted\|rows" $W/home/jobs/*/*_log.* | cut -c1-200
