"""Process limits (ulimit) a run needs, checked before any build starts: one line naming the limit
and the fix instead of an INTERNALERROR or a silent abort deep in pytest or torch. Low soft limits
are first raised up to the hard one."""

from __future__ import annotations

import math
import subprocess
import sys

from gpubench.harness.core.exits import UsageError

try:
    import resource
# not a Unix: no ulimit to check
except ImportError:
    resource = None  # type: ignore[assignment]

# pytest, torch, a DataLoader's worker pipes and torchrun's sockets: 16 was the least that ran one
# smoke case at all, and a DataLoader case needs dozens more; most systems give 1024.
MIN_OPEN_FILES = 64
# the soft limit is raised this far when the hard limit allows
WANTED_OPEN_FILES = 4096
# below this (ulimit -u, threads count), torch's thread pools may fail to start
FEW_PROCESSES = 1024
# below this (ulimit -u) DataLoader workers and DDP ranks cannot start even if torch does
MIN_PROCESSES = 64
# ulimit -f: a run's CSV, sidecars and pytest-benchmark's JSON, torch's compile caches
MIN_FILE_BYTES = 1 << 30
# ulimit -t, per process: one build of the quick profile spends minutes of CPU on a busy machine
MIN_CPU_S = 600
PROBE_TIMEOUT_S = 120
# Imports torch and runs one threaded matmul: what every build process does first.
TORCH_PROBE = "import torch; torch.ones(256, 256) @ torch.ones(256, 256)"


def _as_number(limit: int) -> float:
    """RLIM_INFINITY is -1 on Linux: as infinity, so that limits compare as they mean."""
    return math.inf if limit == resource.RLIM_INFINITY else limit


def raise_soft_limit(kind: int, wanted: int) -> tuple[int, int]:
    """(soft, hard) of `kind` after raising soft towards `wanted`, never above hard."""
    soft, hard = resource.getrlimit(kind)
    target = min(_as_number(wanted), _as_number(hard))
    if _as_number(soft) < target:
        raised = resource.RLIM_INFINITY if target == math.inf else int(target)
        try:
            resource.setrlimit(kind, (raised, hard))
            soft = raised
        except (ValueError, OSError):
            pass
    return soft, hard


def check_open_files() -> None:
    soft, _ = raise_soft_limit(resource.RLIMIT_NOFILE, WANTED_OPEN_FILES)
    if _as_number(soft) < MIN_OPEN_FILES:
        raise UsageError(
            f"the open-file limit is {soft} (ulimit -n); a run needs at least {MIN_OPEN_FILES} — "
            "raise it (ulimit -n 1024) and re-run"
        )


def check_size_and_time() -> None:
    """ulimit -f and -t below what a run needs (a file cut mid-row, a build killed by SIGXCPU): one
    line."""
    size, _ = raise_soft_limit(resource.RLIMIT_FSIZE, resource.RLIM_INFINITY)
    if _as_number(size) < MIN_FILE_BYTES:
        raise UsageError(
            f"the file-size limit is {size} bytes (ulimit -f {size // 1024}); a run writes files "
            f"up to {MIN_FILE_BYTES >> 30} GiB — raise it (ulimit -f unlimited) and re-run"
        )
    cpu, _ = raise_soft_limit(resource.RLIMIT_CPU, resource.RLIM_INFINITY)
    if _as_number(cpu) < MIN_CPU_S:
        raise UsageError(
            f"the CPU-time limit is {cpu} s a process (ulimit -t); a build needs at least "
            f"{MIN_CPU_S} s — raise it (ulimit -t unlimited) and re-run"
        )
    processes, _ = raise_soft_limit(resource.RLIMIT_NPROC, FEW_PROCESSES)
    if _as_number(processes) < MIN_PROCESSES:
        raise UsageError(
            f"the process limit is {processes} (ulimit -u); DataLoader workers and DDP ranks need "
            "more — raise it (ulimit -u 4096) and re-run"
        )


def tight_limits() -> list[str]:
    """The limits under which torch itself may not start: a finite address space, few processes."""
    tight = []
    address_space, _ = raise_soft_limit(resource.RLIMIT_AS, resource.RLIM_INFINITY)
    if address_space != resource.RLIM_INFINITY:
        tight.append(f"ulimit -v {address_space // 1024}")
    processes, _ = raise_soft_limit(resource.RLIMIT_NPROC, FEW_PROCESSES)
    if _as_number(processes) < FEW_PROCESSES:
        tight.append(f"ulimit -u {processes}")
    return tight


def torch_starts(python: str = sys.executable) -> str | None:
    """None when a child under these limits can import torch and run a threaded op, else its last
    line."""
    try:
        done = subprocess.run(
            [python, "-c", TORCH_PROBE],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    if done.returncode == 0:
        return None
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    return lines[-1] if lines else f"exit {done.returncode}"


def check_limits(python: str = sys.executable) -> None:
    """Refuses, in one line, this process's limits where they would stop a run before or during its
    first case."""
    if resource is None:
        return
    check_open_files()
    check_size_and_time()
    tight = tight_limits()
    if not tight:
        return
    # only under tight limits: a normal run pays nothing for the check
    failure = torch_starts(python)
    if failure is not None:
        raise UsageError(
            f"torch cannot start under this shell's limits ({', '.join(tight)}): {failure} — "
            "raise them (ulimit -v unlimited; ulimit -u 4096) and re-run"
        )
