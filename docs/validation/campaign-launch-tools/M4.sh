# a member made the machine folder by hand, 0777 and not sticky; the user's run writes into it; can the member replace it?
. "$(dirname "$0")/M.sh"
"${NB[@]}" mkdir $W/store/$M; "${NB[@]}" chmod 777 $W/store/$M
"${RUN[@]}" --store $W/store --run-id a 2>&1 | grep "^gpubench\|warn" | cut -c1-250; echo "user: exit ${PIPESTATUS[0]}"
"${NB[@]}" sh -c "mv $W/store/$M/a.csv $W/store/$M/old && cp $W/store/$M/old $W/store/$M/a.csv && echo 'member replaced a.csv with a copy of their own'"; stat -c '%U %n' $W/store/$M/a.csv
