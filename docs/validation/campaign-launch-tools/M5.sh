# a member makes STORE/reports a link to a folder of theirs elsewhere; the user's fleet writes its report
. "$(dirname "$0")/M.sh"; mkdir -m 700 $W/home
"${NB[@]}" mkdir -m 777 $W/nbhome/theirs; "${NB[@]}" ln -s $W/nbhome/theirs $W/store/reports
"${FL[@]}" --store $W/store --jobs-dir $W/home/jobs 2>&1 | tail -2; echo "exit ${PIPESTATUS[0]}"; ls $W/nbhome/theirs/*/ 2>/dev/null | head -3
