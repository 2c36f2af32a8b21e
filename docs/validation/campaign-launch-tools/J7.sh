# a folder above the jobs dir that a POSIX ACL opens to nobody (mode shows 0775, root:root)
. "$(dirname "$0")/common.sh"
mkdir $W/home; chmod 755 $W/home; $PY $T/acl.py $W/home 65534
"${FL[@]}" --store $W/S --jobs-dir $W/home/jobs 2>&1 | tail -2; echo "exit ${PIPESTATUS[0]}"
setpriv --reuid=65534 --regid=65534 --clear-groups mv $W/home/jobs $W/home/swapped && echo 'nobody renamed the jobs folder'
