# the same team folder with the sticky bit (3775): no member renames another's entry, accepted
. "$(dirname "$0")/common.sh"
mkdir $W/team; chown root:65533 $W/team; chmod 3775 $W/team
"${FL[@]}" --store $W/S --jobs-dir $W/team/alice/jobs 2>&1 | tail -2; echo "exit ${PIPESTATUS[0]}"
"${NB[@]}" mv $W/team/alice $W/team/x 2>&1; echo "nobody mv exit $?"
