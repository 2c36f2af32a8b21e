# umask 0, and a secret in --b-env: the modes of what the session writes, and where the value appears
. "$(dirname "$0")/common.sh"; umask 0
"${AB[@]}" --results-dir $W/r/deep --run-id s --b-env CAMP_TOKEN=s3cr3t-4711 > $W/log 2>&1; echo "exit $?"
stat -c '%a %n' $W/r $W/r/deep $W/r/deep/*; grep -rl "s3cr3t-4711" $W/r $W/log || echo "the value is in no file written nor in the output"
