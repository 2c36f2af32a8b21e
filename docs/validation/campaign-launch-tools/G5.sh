# gpubench ab with --a-python a wrapper that leaves a setsid daemon at every start (the probe and each build)
. "$(dirname "$0")/common.sh"
before=$(pgrep -f "^sleep 3001$" | sort)
S=$SECONDS; timeout 300 "${AB[@]}" --results-dir $W/r --run-id s --a-python $CL/py/daemonizing > $W/log 2>&1; echo "exit $? after $((SECONDS-S)) s"
grep "^gpubench\|verdict" $W/log | cut -c1-200
left=$(comm -13 <(echo "$before") <(pgrep -f "^sleep 3001$" | sort)); echo "sleeps left: $(echo $left | wc -w)"; [ -n "$left" ] && kill $left
