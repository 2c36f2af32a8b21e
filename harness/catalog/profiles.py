"""Profiles: how much of the suite runs and for how long. A `Profile` is a str enum, so it is
still the plain name in CSV rows, option values and dict keys (`LADDERS[("quick", "cpu")]`)."""

from __future__ import annotations

from enum import Enum

from gpubench.harness.core.plan import BuildTiming
from gpubench.harness.core.exits import UsageError


class Profile(str, Enum):
    # tiny: tests the suite itself, figures meaningless
    SMOKE = "smoke"
    # the default: minutes on a 2-core CPU
    QUICK = "quick"
    # every size and setting
    FULL = "full"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @property
    def timing(self) -> BuildTiming:
        return BUILD_TIMINGS[self]

    @property
    def run_budget_s(self) -> float | None:
        """The whole run's time unless --budget says otherwise; None: no limit."""
        return RUN_BUDGETS_S[self]

    @property
    def default_builds(self) -> int:
        """Independent builds per case: `compare` judges a change against the spread between builds,
        not rounds."""
        return DEFAULT_BUILDS[self]


def check_profile(name: str | Profile) -> Profile:
    try:
        return Profile(name)
    except ValueError:
        raise UsageError(f"unknown profile {name!r}: use --profile quick, full or smoke") from None


# Seconds of timed work per build of a micro-benchmark case. Many short builds beat few long ones:
# on a shared machine a case's speed changes between builds, and that spread is what a comparison is
# judged against.
BUILD_TIMINGS: dict[Profile, BuildTiming] = {
    Profile.SMOKE: BuildTiming(target_s=0.05, min_rounds=3, max_rounds=5, warmup_calls=1),
    # quick: rounds of at least 15 ms, each the mean of many calls of a fast case: on a 2-core
    # machine rounds of 1-2 ms spread 7-9% (IQR/median) and flagged three rows in four noisy; rounds
    # of 15 ms and more spread 2-4%. At least 8 rounds: the IQR of 5 training steps flagged half the
    # memory-strategy rows.
    Profile.QUICK: BuildTiming(
        target_s=0.25, min_round_s=0.015, min_rounds=8, max_rounds=100, warmup_calls=2
    ),
    Profile.FULL: BuildTiming(target_s=0.3, min_rounds=10, max_rounds=500, warmup_calls=3),
}
DEFAULT_BUILDS: dict[Profile, int] = {Profile.SMOKE: 1, Profile.QUICK: 3, Profile.FULL: 7}
# The whole run's wall time by default (--budget): quick must finish `make bench` within minutes on
# a 2-core CPU and still hold every summary row, which cost ~4m20s on a fresh-clone 2-core VM
# (epochs ~90 s, time to accuracy ~110 s, DDP ~30 s, the rest ~40 s); 3 minutes dropped DDP, the
# raced epoch or a time to accuracy in one run of three.
RUN_BUDGETS_S: dict[Profile, float | None] = {
    Profile.SMOKE: None,
    Profile.QUICK: 300.0,
    Profile.FULL: None,
}
