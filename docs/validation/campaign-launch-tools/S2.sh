# the marker name is another user's file, made first
. "$(dirname "$0")/common.sh"; mkdir -m 1777 $W/r; chmod 1777 $W/r; "${NB[@]}" sh -c "echo '{}' > $W/r/s.ab.json"
"${AB[@]}" --results-dir $W/r --run-id s; echo "exit $?"; ls -l $W/r
