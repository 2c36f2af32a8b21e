# jobs dir under a symlinked parent whose target is a private folder of the user: accepted
. "$(dirname "$0")/common.sh"
mkdir -m 700 $W/priv $W/home; ln -s $W/priv $W/home/link
"${FL[@]}" --store $W/S --jobs-dir $W/home/link/jobs 2>&1 | tail -3; echo "exit ${PIPESTATUS[0]}"; ls -l $W/priv/jobs/*/ | head -3
