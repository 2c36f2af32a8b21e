# a build that ignores SIGTERM (and sleeps 40 s in its session start); SIGTERM to gpubench run 12 s in
. "$(dirname "$0")/common.sh"
export PYTHONPATH=$PWD:$T CAMP_MODE=ignore-term CAMP_PID=$W/pid
S=$SECONDS; "${RUN[@]}" --results-dir $W/r --run-id s -p campplug > $W/log 2>&1 & R=$!
sleep 12; kill -TERM $R; wait $R; echo "exit $? after $((SECONDS-S)) s"; grep "^gpubench" $W/log
pgrep -f "campplug" && echo "LEFT RUNNING" || echo "nothing left"
