# umask 0, gpubench run --store into the team store and into a plain one
. "$(dirname "$0")/M.sh"; umask 0
"${RUN[@]}" --store $W/store --run-id a > /dev/null 2>&1; echo "exit $?"; "${RUN[@]}" --store $W/plain --run-id b > /dev/null 2>&1; echo "exit $?"
stat -c '%A %a %n' $W/store $W/store/* $W/store/*/* $W/plain $W/plain/* $W/plain/*/*
