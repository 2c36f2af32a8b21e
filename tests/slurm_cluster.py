"""A real one-node Slurm cluster on this machine, for the fleet tests: munged with a generated key,
slurmctld and slurmd started by hand from a minimal config in a temporary folder (one node with
CPUs=2, partitions `a` and `b` mapping to it with OverSubscribe=YES, SlurmUser=root,
proctrack/linuxproc, task/none, no cgroup.conf, no accounting). Every daemon started here is
stopped by `stop()`, by pid. `start()` raises ClusterUnavailable with the reason (and the log's
tail) when the binaries are missing or a daemon does not come up: the tests skip with it.

Debian's slurm-wlm 22.05 logs PMIx errors in slurmd's log when started this way; they are
harmless."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

BINARIES = ("munged", "slurmctld", "slurmd", "sinfo", "squeue", "sbatch", "scancel")
READY_TIMEOUT_S = 60


class ClusterUnavailable(RuntimeError):
    """Why no cluster could be started (one line, then the log's tail)."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"({path} not written)"


def slurm_conf(root: Path, node: str, cpus: int, memory_mb: int, munge_socket: Path) -> str:
    # not the default 6817/6818: a system cluster may hold them
    ctld_port, slurmd_port = free_port(), free_port()
    return f"""ClusterName=gpubenchtest
SlurmctldHost={node}
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MailProg=/bin/true
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=30
KillWait=5
NodeName={node} CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN
PartitionName=a Nodes={node} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
PartitionName=b Nodes={node} MaxTime=INFINITE State=UP OverSubscribe=YES
"""


@dataclass
class SlurmCluster:
    root: Path
    node: str = field(default_factory=socket.gethostname)
    cpus: int = 2
    memory_mb: int = 4096
    pids: dict[str, int] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """The environment a client (sbatch, squeue, submitit) needs to reach this cluster."""
        return dict(os.environ, SLURM_CONF=str(self.conf))

    def start(self) -> None:
        missing = [name for name in BINARIES if shutil.which(name) is None]
        if missing:
            raise ClusterUnavailable(
                f"Slurm binaries missing ({', '.join(missing)}): apt-get install slurm-wlm munge"
            )
        if os.geteuid() != 0:
            raise ClusterUnavailable(
                "the test cluster runs its daemons as root (SlurmUser=root); run the tests as root"
            )
        for folder in ("state", "spool", "munge"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root / "munge", 0o700)
        socket_path = self._start_munge()
        self.conf.write_text(
            slurm_conf(self.root, self.node, self.cpus, self.memory_mb, socket_path)
        )
        self._daemon(
            "slurmctld",
            ["slurmctld", "-f", str(self.conf), "-i"],
            self.root / "slurmctld.pid",
            self.root / "slurmctld.log",
        )
        self._daemon(
            "slurmd",
            ["slurmd", "-f", str(self.conf)],
            self.root / "slurmd.pid",
            self.root / "slurmd.log",
        )
        self._wait_idle()

    def _start_munge(self) -> Path:
        folder = self.root / "munge"
        key = folder / "munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        os.chmod(key, 0o400)
        socket_path = folder / "munge.socket"
        argv = [
            "munged",
            "--force",
            f"--key-file={key}",
            f"--socket={socket_path}",
            f"--pid-file={folder / 'munged.pid'}",
            f"--log-file={folder / 'munged.log'}",
            f"--seed-file={folder / 'munged.seed'}",
        ]
        self._daemon("munged", argv, folder / "munged.pid", folder / "munged.log")
        return socket_path

    def _daemon(self, name: str, argv: list[str], pid_file: Path, log: Path) -> None:
        """Each daemon forks into the background and writes its pid file; its pid is kept to stop
        it."""
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=30, env=self.env, check=False
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if pid_file.exists() and pid_file.read_text().strip():
                self.pids[name] = int(pid_file.read_text().strip())
                return
            time.sleep(0.2)
        raise ClusterUnavailable(
            f"{name} did not start (exit {done.returncode}: {done.stderr.strip()[-300:]}); log "
            f"tail:\n{tail(log)}"
        )

    def _wait_idle(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        state = ""
        while time.monotonic() < deadline:
            out = subprocess.run(
                ["sinfo", "-h", "-N", "-o", "%t"],
                capture_output=True,
                text=True,
                env=self.env,
                timeout=30,
                check=False,
            )
            state = (out.stdout + out.stderr).strip()
            if (
                out.returncode == 0
                and state
                and all(line.strip() in ("idle", "mix") for line in state.splitlines())
            ):
                return
            time.sleep(0.5)
        raise ClusterUnavailable(
            f"the node never showed idle in sinfo (last: {state!r}); slurmd log "
            f"tail:\n{tail(self.root / 'slurmd.log')}\nslurmctld log "
            f"tail:\n{tail(self.root / 'slurmctld.log')}"
        )

    def queue(self) -> list[str]:
        """The job ids squeue lists (every state), or the error squeue printed."""
        out = subprocess.run(
            ["squeue", "-h", "-o", "%i"],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=30,
            check=False,
        )
        if out.returncode != 0:
            raise RuntimeError(f"squeue failed: {out.stderr.strip()}")
        return out.stdout.split()

    def cancel_jobs(self) -> None:
        """Cancel whatever a test left in this cluster's queue (only this cluster: SLURM_CONF names
        it)."""
        if "slurmctld" not in self.pids:
            return
        subprocess.run(
            ["scancel", f"--user={os.geteuid()}"],
            capture_output=True,
            env=self.env,
            timeout=30,
            check=False,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if not self.queue():
                    return
            except (RuntimeError, subprocess.TimeoutExpired):
                return
            time.sleep(0.5)

    def stop(self) -> None:
        """Cancel the jobs left, then SIGTERM each daemon this cluster started (by pid, newest
        first), SIGKILL if it lingers."""
        self.cancel_jobs()
        for name in ("slurmd", "slurmctld", "munged"):
            pid = self.pids.pop(name, None)
            if pid is None:
                continue
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and alive(pid):
                time.sleep(0.1)
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (our child that exited) counts as gone
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False
