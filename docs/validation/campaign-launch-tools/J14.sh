# a member made STORE/jobs first (theirs, 0777); the user's fleet is pointed there
. "$(dirname "$0")/common.sh"
mkdir $W/store; chown root:65533 $W/store; chmod 3770 $W/store; "${NB[@]}" mkdir -m 777 $W/store/jobs
"${FL[@]}" --store $W/store --jobs-dir $W/store/jobs 2>&1 | tail -1; echo "exit ${PIPESTATUS[0]}"; ls -A $W/store/jobs
