# usage: G.sh MODE  -- gpubench run whose build 0 leaves a process behind (campplug); how long the run takes, what is left
. "$(dirname "$0")/common.sh"
export PYTHONPATH=$PWD:$T CAMP_MODE=$1 CAMP_PID=$W/pid
S=$SECONDS; timeout -k 30 300 "${RUN[@]}" --results-dir $W/r --run-id s -p campplug > $W/log 2>&1; echo "exit $? after $((SECONDS-S)) s"
grep "^gpubench" $W/log; sleep 1; P=$(cat $W/pid)
ps -o pid,ppid,pgid,sid,stat,cmd -p $P | tail -n +2 | grep -v " Z " && { echo "LEFT RUNNING: $P"; kill -9 $P; } || echo "gone"
