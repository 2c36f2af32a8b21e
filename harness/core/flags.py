"""Every flag a row can carry, named once.

A row's `flags` cell holds its flags joined by `;`. Each flag is defined here and decided in one
module, named above it; docs/columns.md says what each means to a reader. A reader asks a flag,
never the reason's words. Torch-free.
"""

from __future__ import annotations

# measurement/runner: one sample only (a case timed once, an epoch with one window).
ONE_SAMPLE = "one-sample"
# measurement/runner, by core/stats.is_noisy: the figure's interval reaches past its noise bound.
NOISY = "noisy"
# measurement/runner: a median round shorter than the build's minimum round (the clock's overhead
# shows).
SHORT_ROUNDS = "short-rounds"
# measurement/runner, from devices/energy's telemetry: the device slowed itself (heat, power).
THROTTLED = "throttled"
# measurement/runner: fewer rounds than planned, to fit --budget (the reason says how many).
CAPPED = "capped"
# workloads/elementwise: the working set fits a cache; its GB/s is no memory bandwidth.
CACHE = "cache"
# devices/machine_load: another process used the CPU, or the GPU, while the row was timed.
BUSY = "busy"
BUSY_GPU = "busy-gpu"
BUSY_FLAGS = frozenset({BUSY, BUSY_GPU})
# Other processes took more than this share of the machine's CPU during the case: the row is `busy`.
BUSY_FRAC = 0.25
# core/bounds: a figure past its bound (above the device's peak, scaling past linear).
IMPOSSIBLE = "impossible"
# budget/shares: skipped, one call did not fit the case's share of the budget.
OVER_BUDGET_FLAG = "over-budget"
# budget/plan: the plan left the case out before it was built, for a cost measured on this machine
# (a left-out row is over-budget too).
LEFT_OUT_FLAG = "left-out"


def has_flag(flags: object, flag: str) -> bool:
    """Whether a row's `;`-separated flags cell holds `flag`."""
    return isinstance(flags, str) and flag in flags.split(";")


def flag_pattern(flag: str) -> str:
    """A regular expression that finds `flag` in a flags cell (for a column of them at once)."""
    return rf"(?:^|;){flag}(?:;|$)"
