# the first member to run on this machine has umask 077; a second member then runs on the same machine
. "$(dirname "$0")/M.sh"
(umask 077; "${RUN[@]}" --store $W/store --run-id a > /dev/null 2>&1; echo "first member: exit $?")
stat -c '%A %U:%G %n' $W/store/$M $W/store/$M/*
(umask 007; NBRUN "${RUNNB[@]}" --store $W/store --run-id b 2>&1 | grep -v "^  \|^$" | tail -2; echo "second member: exit ${PIPESTATUS[0]}")
