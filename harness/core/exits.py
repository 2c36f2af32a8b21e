"""Every exit code of the `gpubench` command, with its meaning (docs/usage.md lists the same,
checked by a test). A build process exits with pytest's codes, which share 0, 1, 3, 4 and 5 with
these; its 2 (interrupted) is reported as 130."""

from __future__ import annotations

import signal
from enum import IntEnum


class ExitCode(IntEnum):
    meaning: str

    def __new__(cls, value: int, meaning: str) -> ExitCode:
        member = int.__new__(cls, value)
        member._value_ = value
        member.meaning = meaning
        return member

    OK = 0, "done: every case passed, no slowdown, every target done"
    FAILED = (
        1,
        (
            "a case failed; for compare and ab, slower beyond the threshold or a broken case (for "
            "compare also one BASE measured that NEW's budget held back); for fleet, a target "
            "failed"
        ),
    )
    ERROR = (
        2,
        "bad input (a usage error, a file that cannot be read, a refused folder): one line naming "
        "it",
    )
    INTERNAL = 3, "pytest internal error in a build"
    REFUSED = (
        4,
        (
            "a problem found before the first case: an option, the device, the run id, the "
            "results folder, a limit"
        ),
    )
    NO_CASES = 5, "no case matched -k/-m"
    CANNOT_JUDGE = (
        6,
        (
            "compare: cannot judge: busy; a case reads slower with NEW's rows flagged busy, or "
            "faster with BASE's, and none is slower or broken: rerun that side on a quiet "
            "machine. Also cannot judge: two modes, a DRAM case whose sides read the memory's two "
            "modes (docs/method.md)"
        ),
    )
    NOTHING_MEASURED = (
        7,
        (
            "nothing measured: every case ended out of memory or skipped (over budget, not for "
            "this device); rows kept, no figure"
        ),
    )
    REPORT_NOT_WRITTEN = (
        8,
        (
            "report not written: its folder full or not writable, or its rows unreadable; the rows "
            "are whole, gpubench report makes it later"
        ),
    )
    RESULTS_FULL = 75, "results folder full; EX_TEMPFAIL: no further build starts"
    HANGUP = 129, "hung up; SIGHUP: the terminal closed"
    INTERRUPTED = 130, "interrupted; Ctrl-C or SIGINT"
    TERMINATED = 143, "terminated; SIGTERM"


# 128 + N: killed by signal N
SIGNAL_BASE = 128


class UsageError(ValueError):
    """Input the run cannot use (an option, a device, a file name, a model): its message is the one
    line that names the fix, shown before any case runs or beside the rows already kept."""


class StopSignal(KeyboardInterrupt):
    """SIGTERM, SIGHUP or SIGINT raised like Ctrl-C: the work in progress unwinds through its
    finally blocks (a DDP launch killed, its workdir removed) where the default action would end the
    process mid-case; `code` is the exit it asks for, 128 + the signal."""

    def __init__(self, signum: int, why: str = "") -> None:
        name = signal.Signals(signum).name
        super().__init__(f"{name}: {why}" if why else name)
        self.code = SIGNAL_BASE + signum


# pytest.ExitCode.INTERRUPTED: a build process's Ctrl-C
BUILD_INTERRUPTED = 2
# A build process ending with one of these stops the run or session: no further build starts.
BUILD_STOPS = frozenset(
    {
        BUILD_INTERRUPTED,
        ExitCode.INTERNAL,
        ExitCode.REFUSED,
        ExitCode.RESULTS_FULL,
        ExitCode.HANGUP,
        ExitCode.TERMINATED,
    }
)
# What the command makes of its builds' rows, never a build's own exit: a build exiting with one is
# its code's doing.
RUN_OUTCOMES = frozenset({ExitCode.NOTHING_MEASURED, ExitCode.REPORT_NOT_WRITTEN})
NO_CASES_LINE = (
    "no case matched the selection: nothing was run (pytest collected none: "
    "a -k or -m that matches nothing, or --tests files without test_ functions)"
)


def meaning_of(code: int) -> str:
    """What an exit code of `gpubench run` says ('' for one it never gives): a meaning's first
    clause is run's."""
    if code in ExitCode._value2member_map_:
        return ExitCode(code).meaning.split(";")[0]
    return f"killed by signal {code - SIGNAL_BASE}" if code > SIGNAL_BASE else ""
