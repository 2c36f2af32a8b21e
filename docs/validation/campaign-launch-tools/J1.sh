# jobs dir under a symlinked parent whose target is a shared 0777 folder (no sticky)
. "$(dirname "$0")/common.sh"
mkdir -m 777 $W/open; chmod 777 $W/open; mkdir -m 700 $W/home; ln -s $W/open $W/home/link
"${FL[@]}" --store $W/S --jobs-dir $W/home/link/jobs; echo "exit $?"; ls -A $W/open
