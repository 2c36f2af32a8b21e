# a folder above the jobs dir turns world-writable mid-fleet (after the first of two local targets started)
. "$(dirname "$0")/common.sh"
mkdir -m 700 $W/home
"${FL[@]}" --store $W/S --jobs-dir $W/home/jobs --target name=a --target name=b > $W/log 2>&1 &
until grep -q "running" $W/log 2>/dev/null; do sleep 0.2; done; chmod 777 $W/home; echo "chmod 777 $W/home"
wait $!; echo "exit $?"; cat $W/log | grep -v "^    "
