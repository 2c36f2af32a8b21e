# root's private-looking group (root:root 0775, group root has no listed member) where another account's primary group is root
. "$(dirname "$0")/common.sh"
mkdir $W/home; chmod 775 $W/home
cp /etc/passwd $W/passwd; echo 'bob:x:1001:0:bob:/tmp:/bin/sh' >> $W/passwd
unshare -m bash -c "mount --bind $W/passwd /etc/passwd; $(declare -p FL); \"\${FL[@]}\" --store $W/S --jobs-dir $W/home/jobs 2>&1 | tail -2; echo exit \${PIPESTATUS[0]}
  setpriv --reuid=1001 --regid=0 --clear-groups mv $W/home/jobs $W/home/swapped && echo 'bob (gid root) renamed the jobs folder'"
