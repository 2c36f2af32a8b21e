# Once, as root: the team group, and the stand-in interpreters of the A* variants under $CL/py.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
getent group 65533 >/dev/null || groupadd -g 65533 gbteam
rm -rf $CL/py "$CL/my venv"  # made afresh: nothing is written through a link left there
mkdir -p $CL/py/adir "$CL/my venv/bin" $CL/out
w() { printf '#!/bin/sh\n%s\n' "$2" > "$CL/py/$1"; chmod 755 "$CL/py/$1"; }
w hangs-after "$PY \"\$@\"; sleep 100                 # python answers, then the wrapper hangs"
w noexec "exec $PY \"\$@\""; chmod 644 $CL/py/noexec
w python2-like "echo \"('gpubench-probe', 2)\"     # what python 2 prints for the probe's print(a, b)"
w echo-fake 'echo "gpubench-probe 3"               # a fake banner, no python'
w backgrounds "$PY \"\$@\" & exit 0                  # python put in the background"
w banner "yes 'banner line of a module system' | head -c 1000000; exec $PY \"\$@\""
w daemonizing "setsid sleep 3001 & exec $PY \"\$@\"  # a daemon of its own at every start"
w "with newline
python" "exec $PY \"\$@\""
ln -sfn loop2 $CL/py/loop1; ln -sfn loop1 $CL/py/loop2
printf '#!/bin/sh\nexec %s "$@"\n' "$PY" > "$CL/my venv/bin/python"; chmod 755 "$CL/my venv/bin/python"
chmod 755 $CL $CL/py "$CL/my venv" "$CL/my venv/bin"
