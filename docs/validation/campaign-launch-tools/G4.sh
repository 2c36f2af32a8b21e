# a child in the build's group that ignores TERM, INT and HUP: after a normal end of the run, is it left?
. "$(dirname "$0")/common.sh"
export PYTHONPATH=$PWD:$T CAMP_MODE=group-child-ignores CAMP_PID=$W/pid
S=$SECONDS; "${RUN[@]}" --results-dir $W/r --run-id s -p campplug > $W/log 2>&1; echo "exit $? after $((SECONDS-S)) s"
sleep 1; P=$(cat $W/pid); ps -o pid,stat,cmd -p $P | tail -n +2 | grep -v " Z " && { echo "LEFT RUNNING"; kill -9 $P; } || echo "gone"
