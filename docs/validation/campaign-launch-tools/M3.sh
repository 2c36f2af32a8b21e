# the second member (umask 007) makes the machine folder first; the user runs next; can the member remove the user's run?
. "$(dirname "$0")/M.sh"
(umask 007; NBRUN "${RUNNB[@]}" --store $W/store --run-id b > /dev/null 2>&1; echo "member: exit $?")
"${RUN[@]}" --store $W/store --run-id a > /dev/null 2>&1; echo "user: exit $?"; stat -c '%A %U:%G %n' $W/store/$M $W/store/$M/*.csv
"${NB[@]}" rm -f $W/store/$M/a.csv; "${NB[@]}" mv $W/store/$M/a.csv $W/store/$M/x.csv; ls $W/store/$M/
