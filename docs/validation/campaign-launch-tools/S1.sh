# the session's marker name is a link planted beforehand (to a file of the user's), then a dangling one
. "$(dirname "$0")/common.sh"; mkdir $W/r; echo precious > $W/target
ln -s $W/target $W/r/s.ab.json; "${AB[@]}" --results-dir $W/r --run-id s; echo "exit $?"; cat $W/target
rm $W/r/s.ab.json; ln -s $W/nowhere $W/r/s.ab.json; "${AB[@]}" --results-dir $W/r --run-id s; echo "exit $?"; ls $W
