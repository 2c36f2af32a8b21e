# jobs dir in a root-owned, group-writable (setgid 2775 root:65533) team folder, no sticky
. "$(dirname "$0")/common.sh"
mkdir $W/team; chown root:65533 $W/team; chmod 2775 $W/team
"${FL[@]}" --store $W/S --jobs-dir $W/team/alice/jobs; echo "exit $?"
