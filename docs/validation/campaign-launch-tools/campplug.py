"""A pytest plugin for the campaign: what a build process leaves behind, chosen by CAMP_MODE, in build 0."""
import os, signal, subprocess, sys, time

def pytest_sessionstart(session):
    mode, out = os.environ.get("CAMP_MODE", ""), os.environ.get("CAMP_PID", "/tmp/cl-pid")
    if not any(a == "--gpubench-build=0" for a in sys.argv):
        return
    if mode == "setsid":  # a daemon in a session of its own
        p = subprocess.Popen(["sleep", "3002"], start_new_session=True)
        open(out, "w").write(str(p.pid))
    elif mode == "doublefork":  # the classic daemon: fork, setsid, fork, the middle one exits
        r, w = os.pipe()
        if os.fork() == 0:
            os.setsid()
            pid = os.fork()
            if pid == 0:
                os.execvp("sleep", ["sleep", "3002"])
            os.write(w, str(pid).encode()); os._exit(0)
        os.close(w); pid = os.read(r, 64).decode(); os.wait()
        open(out, "w").write(pid)
    elif mode == "spin-setsid":  # a background load that would measure against later builds
        p = subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
        open(out, "w").write(str(p.pid))
    elif mode == "ignore-term":  # the build ignores SIGTERM and takes long
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(40)
    elif mode == "group-child-ignores":  # a child in the build's group that ignores TERM and INT
        p = subprocess.Popen(["sh", "-c", "trap '' TERM INT HUP; sleep 3001"])
        open(out, "w").write(str(p.pid))
