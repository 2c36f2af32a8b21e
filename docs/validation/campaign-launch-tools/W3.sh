# pid reuse: the token names a live pid (this shell) with another start time, as a pid given to a later process
. "$(dirname "$0")/common.sh"
S=$SECONDS; GPUBENCH_STOP_WITH="$$:12345.000" "${RUN[@]}" --builds 3 --results-dir $W/r --run-id s > $W/log 2>&1; echo "exit $? after $((SECONDS-S)) s"; grep "^gpubench" $W/log
