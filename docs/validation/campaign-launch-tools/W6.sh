# gpubench run killed with -9 after its build left a daemon in a session of its own: does the daemon outlive the run?
. "$(dirname "$0")/common.sh"
export PYTHONPATH=$PWD:$T CAMP_MODE=setsid CAMP_PID=$W/pid
"${RUN[@]}" --builds 30 --results-dir $W/r --run-id s -p campplug > $W/log 2>&1 & R=$!
until [ -s $W/pid ]; do sleep 0.2; done; sleep 1; kill -9 $R; sleep 3; P=$(cat $W/pid)
pgrep -af "gpubench-results-dir=$W/r" | cut -c1-100 || echo "no build process left"
ps -o pid,ppid,stat,cmd -p $P | tail -n +2 | grep -v " Z " && { echo "LEFT RUNNING: $P"; kill -9 $P; } || echo "daemon gone"
