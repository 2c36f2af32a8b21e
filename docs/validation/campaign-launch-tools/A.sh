# usage: A.sh PYTHON  -- gpubench ab with --a-python PYTHON; exit, time, gpubench's own lines
. "$(dirname "$0")/common.sh"
S=$SECONDS; timeout 400 "${AB[@]}" --results-dir $W/r --run-id s --a-python "$1" > $W/log 2>&1; echo "exit $? after $((SECONDS-S)) s"
grep "^gpubench\|^ERROR\|error" $W/log | grep -v "device cpu\|energy:\|rows ->" | cut -c1-300; ls $W/r 2>/dev/null | tr '\n' ' '; echo
