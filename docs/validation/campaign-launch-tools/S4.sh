# umask 077: the session's files
. "$(dirname "$0")/common.sh"; umask 077
"${AB[@]}" --results-dir $W/r --run-id s > $W/log 2>&1; echo "exit $?"; stat -c '%a %n' $W/r $W/r/*
