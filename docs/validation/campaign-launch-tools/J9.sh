# the fleet's own jobs folder opened (chmod 777) while its first job runs
. "$(dirname "$0")/common.sh"
mkdir -m 700 $W/home
"${FL[@]}" --store $W/S --jobs-dir $W/home/jobs --target name=a --target name=b > $W/log 2>&1 &
until grep -q "running" $W/log 2>/dev/null; do sleep 0.2; done; chmod 777 $W/home/jobs/*; echo "chmod 777 the fleet folder"
wait $!; echo "exit $?"; cat $W/log | grep -v "^    "
