# the jobs dir inside a team store (root:gbteam 3770, setgid and sticky): accepted; a member can neither rename nor enter it
. "$(dirname "$0")/common.sh"
mkdir $W/store; chown root:65533 $W/store; chmod 3770 $W/store
"${FL[@]}" --store $W/store --jobs-dir $W/store/jobs 2>&1 | tail -1; echo "exit ${PIPESTATUS[0]}"
"${NB[@]}" mv $W/store/jobs $W/store/x 2>&1; "${NB[@]}" ls $W/store/jobs 2>&1; stat -c '%a %U %n' $W/store/jobs $W/store/jobs/*
