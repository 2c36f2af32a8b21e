"""`TorchrunLauncher`: a DDP launch in a session of its own, watched by its job's heartbeat check
(Job.watch) and killed whole when a rank goes quiet, the launch times out, or torchrun itself
stops."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass

from gpubench.harness.processes.launch import WATCH_PERIOD_S, Completed, Job
from gpubench.harness.processes.lifetime import child_preexec, is_stopped, kill_tree

# after SIGKILL, how long to wait for the killed launch's output
KILL_GRACE_S = 30


@dataclass
class TorchrunLauncher:
    """A session of its own, so the whole launch can be killed without touching this process;
    it dies with this process too (torchrun then stops its ranks)."""

    def run(self, job: Job) -> Completed:
        proc = subprocess.Popen(
            job.argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=job.env,
            start_new_session=True,
            preexec_fn=child_preexec(),
        )
        deadline_s = None if job.timeout_s is None else time.monotonic() + job.timeout_s
        try:
            while True:
                left_s = None if deadline_s is None else max(0.0, deadline_s - time.monotonic())
                wait_s = (
                    left_s
                    if job.watch is None
                    else min(WATCH_PERIOD_S, WATCH_PERIOD_S if left_s is None else left_s)
                )
                # communicate() may be called again after its timeout: nothing read so far is lost
                try:
                    stdout, stderr = proc.communicate(timeout=wait_s)
                    return Completed(proc.returncode, stdout, stderr)
                except subprocess.TimeoutExpired:
                    stalled = job.watch() if job.watch is not None else ""
                    if stalled or (deadline_s is not None and time.monotonic() >= deadline_s):
                        # the ranks went quiet because torchrun was stopped
                        if is_stopped(proc.pid):
                            stalled = (
                                "made no progress: torchrun itself was stopped (state T, SIGSTOP): "
                                "killed with its ranks"
                            )
                        return self._killed(proc, stalled)
        finally:
            # interrupted (Ctrl-C does not reach a separate session): the ranks go too
            if proc.poll() is None:
                kill_tree(proc)
                proc.wait()

    @staticmethod
    def _killed(proc: subprocess.Popen[str], stalled: str) -> Completed:
        kill_tree(proc)
        try:
            stdout, stderr = proc.communicate(timeout=KILL_GRACE_S)
        # something outside the tree still holds the pipes: do not wait on it
        except subprocess.TimeoutExpired:
            stdout, stderr = "", ""
        return Completed(
            proc.returncode if proc.returncode is not None else -9,
            stdout,
            stderr,
            timed_out=not stalled,
            stalled=stalled,
        )
