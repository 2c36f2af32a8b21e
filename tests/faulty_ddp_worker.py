"""The DDP worker with one rank made to fail, for the fault tests: they point
gpubench.harness.workloads.ddp.WORKER_MODULE here, so production code holds no fault hook.

FAULTY_DDP=die|hang|stop and FAULTY_DDP_RANK=R in the launch's environment: rank R kills itself with
SIGKILL (as the OOM killer would) or sleeps for good, just before it joins the process group with its
heartbeat already beating; or it stops itself (SIGSTOP, as `kill -STOP` or a frozen machine would)
right after its first timed step."""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

from gpubench.harness.workloads import ddp_worker

FAULT = os.environ.get("FAULTY_DDP", "")
THIS_RANK = os.environ.get("RANK") == os.environ.get("FAULTY_DDP_RANK")


def fail_before_joining(*args: Any, **kwargs: Any) -> None:
    if THIS_RANK and FAULT == "die":
        os.kill(os.getpid(), signal.SIGKILL)
    while THIS_RANK and FAULT == "hang":
        time.sleep(60)
    join(*args, **kwargs)


class StoppingHeartbeat(ddp_worker.Heartbeat):
    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name == "step" and value == 1 and THIS_RANK and FAULT == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)


join = ddp_worker.dist.init_process_group
ddp_worker.dist.init_process_group = fail_before_joining
ddp_worker.Heartbeat = StoppingHeartbeat

if __name__ == "__main__":
    sys.exit(ddp_worker.main())
