"""The DDP worker with one rank made to fail, for the fault tests: they point
gpubench.harness.workloads.ddp.WORKER_MODULE here, so production code holds no fault hook.

FAULTY_DDP=die|hang|stop and FAULTY_DDP_RANK=R in the launch's environment: rank R kills itself with
SIGKILL (as the OOM killer would) or sleeps for good, just before it joins the process group with
its heartbeat already beating; or it stops itself (SIGSTOP, as `kill -STOP` or a frozen machine
would) right after its first timed step. A stopped rank is continued only once something has asked
it to end (a SIGTERM pending, as torchrun sends each rank when another failed): it then ends at once
instead of holding torchrun's teardown for its 30 s grace — time spent inside torchrun, not in what
the tests check."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from gpubench.harness.workloads import ddp_worker
from gpubench.harness.workloads.common import torchrun_launch

FAULT = os.environ.get("FAULTY_DDP", "")
THIS_RANK = os.environ.get("RANK") == os.environ.get("FAULTY_DDP_RANK")


def fail_before_joining(*args: Any, **kwargs: Any) -> None:
    if THIS_RANK and FAULT == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    while THIS_RANK and FAULT == "hang":
        time.sleep(60)
    join(*args, **kwargs)


def term_pending(pid: int) -> bool:
    """SIGTERM is pending for the (stopped) process `pid`; False once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    pending = int(
        next(line.split()[1] for line in status.splitlines() if line.startswith("ShdPnd:")), 16
    )
    return bool(pending & 1 << (signal.SIGTERM - 1))


def continue_when_asked_to_end(pid: int) -> None:
    """In a forked child: wait for a SIGTERM to the stopped `pid`, then continue it so it takes it.
    The child ignores SIGTERM itself: torchrun may send it to the rank's whole process group."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while os.getppid() == pid and not term_pending(pid):
        time.sleep(0.2)
    if os.getppid() == pid:
        os.kill(pid, signal.SIGCONT)
    os._exit(0)


class StoppingHeartbeat(ddp_worker.Heartbeat):
    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name == "step" and value == 1 and THIS_RANK and FAULT == "stop":
            me = os.getpid()
            if os.fork() == 0:
                continue_when_asked_to_end(me)
            os.kill(me, signal.SIGSTOP)


join = ddp_worker.dist.init_process_group
ddp_worker.dist.init_process_group = fail_before_joining
# the one run_rank starts
torchrun_launch.Heartbeat = StoppingHeartbeat

if __name__ == "__main__":
    sys.exit(ddp_worker.main())
