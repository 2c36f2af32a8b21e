# --jobs-dir '' (an unset shell variable), run from a folder of the user's
. "$(dirname "$0")/common.sh"
mkdir -m 700 $W/cwd; cd $W/cwd
"${FL[@]}" --store $W/S --jobs-dir "" 2>&1 | tail -2; echo "exit ${PIPESTATUS[0]}"; ls -A $W/cwd
