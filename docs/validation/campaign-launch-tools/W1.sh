# a local fleet stopped (SIGSTOP) for 15 s while its job measures, then continued: not taken for dead
. "$(dirname "$0")/common.sh"; mkdir -m 700 $W/home
S=$SECONDS; "${FL[@]}" --builds 4 --store $W/S --jobs-dir $W/home/jobs > $W/log 2>&1 & F=$!
until grep -q running $W/log 2>/dev/null; do sleep 0.2; done; sleep 3; kill -STOP $F; sleep 15; kill -CONT $F
wait $F; echo "exit $? after $((SECONDS-S)) s"; grep -v "^    " $W/log | cut -c1-220; grep -h "has ended" $W/home/jobs/*/*_log.* || echo "no stop line in the job's log"
