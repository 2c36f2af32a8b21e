"""A side's interpreter for `gpubench ab` (--a-python, --b-python): found and seen to start Python 3 with the
packages a build imports, before any build: a wrapper that never starts or a venv without torch would otherwise
fail every build of its side."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import IO

from gpubench.harness.processes.lifetime import (
    adopting, child_pids, child_preexec, ended_unreaped, kill_adopted, kill_group,
)

PYTHON_FIX = "pass the python of a venv that has torch and gpubench's dependencies"


def interpreter(python: str, flag: str) -> str:
    """An interpreter's path; a bare name (python3) is looked up on PATH, as a shell would."""
    found = python if os.sep in python else shutil.which(python) or python
    if not (Path(found).is_file() and os.access(found, os.X_OK)):
        raise ValueError(f"{flag} {python}: not an executable interpreter — {PYTHON_FIX}")
    return found


START_DEADLINE_S = 30.0  # a venv's python on a slow network file system starts in seconds
# the Python major version and what a build imports but does not have (found, not imported: seconds saved)
PROBE = ("import sys, importlib.util as u; print('gpubench-probe', sys.version_info[0], "
         "','.join(m for m in ('torch', 'pytest', 'pytest_benchmark') if u.find_spec(m) is None) or '-')")


def starts_python(python: str, flag: str, deadline_s: float = START_DEADLINE_S) -> None:
    """`python -c PROBE` must print Python 3's answer within `deadline_s`: a wrapper that never starts Python (stuck
    on a lock, waiting for input) hung every build of its side. Run in its own session, its group killed after."""
    command = f"{python} -c {PROBE!r}"
    known = child_pids() if adopting() else None  # under adopt_orphans: what the probe leaves is killed
    probe = subprocess.Popen([python, "-c", PROBE], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=child_preexec())
    kept = bytearray()
    reader = threading.Thread(target=drain, args=(probe.stdout, kept), daemon=True)  # a long banner never blocks it
    reader.start()
    started = ended_unreaped(probe.pid, deadline_s)
    kill_group(probe.pid)  # at the deadline, or what it left behind
    probe.wait()
    if known is not None:
        kill_adopted(known, f"`{command}`")
    reader.join(1.0)  # one outside its group may hold the pipe: what came so far is enough
    if not reader.is_alive():
        probe.stdout.close()
    said = bytes(kept).decode(errors="replace")
    if not started and "gpubench-probe 3" in said:  # a wrapper that waits after its python: so would every build
        raise ValueError(f"{flag} {python}: `{command}` answered as Python 3 but did not exit within "
                         f"{deadline_s:.0f} s (what does it run after python?) — {PYTHON_FIX}")
    if not started:
        raise ValueError(f"{flag} {python}: `{command}` did not start Python within {deadline_s:.0f} s — {PYTHON_FIX}")
    if probe.returncode != 0 or "gpubench-probe 3" not in said:
        first = said.strip().splitlines()[0][:120] if said.strip() else "no output"
        raise ValueError(f"{flag} {python}: not a Python 3 interpreter (`{command}` exited {probe.returncode}: "
                         f"{first}) — {PYTHON_FIX}")
    missing = said.split("gpubench-probe 3", 1)[1].split()[:1]
    if missing and missing[0] != "-":
        raise ValueError(f"{flag} {python}: it has no {missing[0].replace(',', ', ')} — {PYTHON_FIX} "
                         "(pip install gpubench there)")


def drain(pipe: IO[bytes], kept: bytearray, limit: int = 4096) -> None:
    """Read `pipe` to its end, keeping its last `limit` bytes (the probe's answer comes last)."""
    for chunk in iter(lambda: pipe.read1(65536), b""):
        kept += chunk
        del kept[:-limit]
