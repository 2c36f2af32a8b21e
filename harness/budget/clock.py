"""The run's clock: when it began, its deadline (computed here, once, by one formula), and the cut
of code still running past the deadline and its grace."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from gpubench.harness.core.duration_text import format_duration

# A case still running this long past the budget is cut; the larger of the two, so a short budget's
# slow last case is not cut for a few seconds.
OVERRUN_GRACE_S, OVERRUN_GRACE_FRAC = 30.0, 0.25

# The run's start: when this pytest configuration began, not the process (pytester, a notebook, a
# long-lived worker may have lived longer than any budget). Leaves out the interpreter's start and
# pytest's import (~0.3 s).
_run_began_s: float | None = None


def note_run_began() -> None:
    global _run_began_s
    _run_began_s = time.time()


def run_startup_s() -> float:
    """Seconds this run has taken so far: what each later build process pays again before its first
    case."""
    return max(0.0, time.time() - _run_began_s) if _run_began_s is not None else 0.0


def run_deadline_s(budget_s: float, began_s: float | None = None) -> float:
    """The run's end on the wall clock: its start plus its budget. The one formula: `gpubench run`
    computes it once and hands it to every build; a plain pytest run computes it once at set-up,
    from when it began."""
    began_s = time.time() - run_startup_s() if began_s is None else began_s
    return began_s + budget_s


class DeadlinePassed(BaseException):
    """User code cut past the budget and its grace. Not an Exception, so the user's `except
    Exception` cannot swallow it."""


@contextmanager
def cut_after(seconds: float, reason: str) -> Iterator[None]:
    """Raises DeadlinePassed(reason) in whatever Python runs `seconds` from now. Only in the main
    thread with timers, and never over another plugin's alarm (pytest-timeout's signal method):
    there the block runs unbounded."""
    if (
        not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
        or signal.getitimer(signal.ITIMER_REAL)[0] > 0
    ):
        yield
        return

    def cut(signum: int, frame: object) -> None:
        raise DeadlinePassed(reason)

    previous = signal.signal(signal.SIGALRM, cut)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def grace_s(budget_s: float) -> float:
    return max(OVERRUN_GRACE_S, OVERRUN_GRACE_FRAC * budget_s)


def cut_reason(budget_s: float) -> str:
    return (
        f"did not end within the run's {format_duration(budget_s)} budget and "
        f"{format_duration(grace_s(budget_s))} more: cut (its code, a --model factory or a "
        "--tests test, never returned) — raise --budget if it is only slow"
    )
