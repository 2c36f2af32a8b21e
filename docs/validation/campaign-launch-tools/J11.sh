# --jobs-dir an existing file
. "$(dirname "$0")/common.sh"
touch $W/file
"${FL[@]}" --store $W/S --jobs-dir $W/file; echo "exit $?"
