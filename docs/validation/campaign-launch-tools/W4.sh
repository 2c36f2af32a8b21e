# a malformed token in the environment (exported by hand, or a stale shell): GPUBENCH_STOP_WITH=abc
. "$(dirname "$0")/common.sh"
S=$SECONDS; GPUBENCH_STOP_WITH=abc "${RUN[@]}" --builds 3 --results-dir $W/r --run-id s > $W/log 2>&1; echo "exit $? after $((SECONDS-S)) s"; grep "^gpubench" $W/log
