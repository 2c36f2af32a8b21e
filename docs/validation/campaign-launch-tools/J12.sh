# the fleet under umask 0: the modes of its job files
. "$(dirname "$0")/common.sh"
mkdir -m 700 $W/home; umask 0
"${FL[@]}" --store $W/S --jobs-dir $W/home/jobs 2>&1 | tail -1; echo "exit ${PIPESTATUS[0]}"
stat -c '%a %U %n' $W/home/jobs $W/home/jobs/* $W/home/jobs/*/*
