# jobs dir that is itself a link (trailing) to another user's folder
. "$(dirname "$0")/common.sh"
mkdir -m 700 $W/theirs; chown nobody $W/theirs; ln -s $W/theirs $W/jobs
"${FL[@]}" --store $W/S --jobs-dir $W/jobs; echo "exit $?"; ls -A $W/theirs
