# gpubench run killed with -9 mid-build: its build process (and the pytest it is) must not run on
. "$(dirname "$0")/common.sh"
"${RUN[@]}" --builds 50 --results-dir $W/r --run-id s > $W/log 2>&1 & R=$!
until grep -q "results" $W/log 2>/dev/null; do sleep 0.2; done; sleep 3; kill -9 $R; K=$SECONDS
while pgrep -f "gpubench-results-dir=$W/r" >/dev/null; do sleep 0.2; [ $((SECONDS-K)) -gt 30 ] && break; done
echo "build processes gone $((SECONDS-K)) s after the kill"; pgrep -af "gpubench-results-dir=$W/r" | cut -c1-120 || echo "none left"
ls $W/r
