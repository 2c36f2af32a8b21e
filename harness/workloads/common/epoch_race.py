"""Which precision and memory format trains the CNN fastest on this machine, raced: a setting that
wins on one CPU can lose 4x on another (bf16 native on AVX-512 BF16, emulated on AVX2). The result
is kept in the results folder per key, and a kept race is reused only from a file the user alone can
write, when every figure is one a race could produce."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch

from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.measurement.terminal import one_line
from gpubench.harness.records.safe_files import read_json, replace_bytes
from gpubench.harness.workloads.common.models import make_model
from gpubench.harness.workloads.common.train_loop import PRECISIONS, Trainer, precision_skip_reason

RACE_FILE = "epoch-race.json"
# the template's batch size: every contestant trains the same samples per step
RACE_BATCH = 256
# under --budget, the race takes at most this part of its case's share
RACE_SHARE_FRAC = 0.3
# a contestant given less than this cannot be told apart from noise: the race is not run
MIN_CAP_S = 0.05
MAX_FILE_BYTES = 1 << 20
# a kept note or reason longer than any this module writes (one_line's cap) is not a race's
MAX_TEXT_CHARS = 300
# no device trains a batch of 256 through the CNN faster: a kept race claiming so is refused
MIN_STEP_S = 1e-5
RACED_HERE = "raced on this machine"
Step = Callable[[], None]


@dataclass(frozen=True)
class RacePlan:
    # timed steps per contestant, at most
    steps: int
    # timed seconds per contestant, at most (the step that crosses it ends the run)
    cap_s: float
    # untimed steps first: allocator growth, kernel selection
    warmup_steps: int


RACE_PLANS = {
    "smoke": RacePlan(20, 0.5, 1),
    "quick": RacePlan(200, 2.0, 2),
    "full": RacePlan(300, 5.0, 3),
}


@dataclass(frozen=True)
class Contestant:
    precision: str
    channels_last: bool

    @property
    def name(self) -> str:
        return self.precision + ("-cl" if self.channels_last else "")


CONTESTANTS = tuple(Contestant(precision, cl) for precision in PRECISIONS for cl in (False, True))
# every device runs it: the setting used when no contestant finished
FALLBACK = Contestant("fp32", False)


@dataclass(frozen=True)
class Entry:
    """One contestant's run: `status` ok (timed) or skipped (with `reason`)."""

    name: str
    status: str
    steps: int = 0
    seconds: float = 0.0
    samples_per_step: int = RACE_BATCH
    reason: str = ""

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.seconds if self.status == "ok" and self.seconds > 0 else 0.0

    @property
    def samples_per_s(self) -> float:
        return self.steps_per_s * self.samples_per_step


@dataclass(frozen=True)
class RaceResult:
    key: str
    entries: tuple[Entry, ...]
    # why the race was not run or won by none
    note: str = ""
    # every contestant ran its plan's full time cap or steps: a race worth keeping
    complete: bool = True
    # this run's race, or a kept one (and why not, if refused)
    origin: str = RACED_HERE

    @property
    def winner(self) -> Contestant:
        ok = [e for e in self.entries if e.status == "ok" and e.steps_per_s > 0]
        if not ok:
            return FALLBACK
        # the first of equals wins: contestants' order breaks ties
        best = max(ok, key=lambda e: e.samples_per_s)
        return next(c for c in CONTESTANTS if c.name == best.name)

    def summary(self) -> str:
        """One line for the row's reason: each contestant's steps/s, the winner named."""
        winner = self.winner.name
        parts = [
            f"{e.name} {e.steps_per_s:.3g} steps/s" + (" (won)" if e.name == winner else "")
            if e.status == "ok"
            else f"{e.name} skipped ({e.reason})"
            for e in self.entries
        ]
        head = f"{self.origin}: {winner} won" + (f" ({self.note})" if self.note else "")
        return head + (": " + ", ".join(parts) if parts else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "note": self.note,
            "winner": self.winner.name,
            "complete": self.complete,
            "entries": [
                dict(asdict(e), steps_per_s=e.steps_per_s, samples_per_s=e.samples_per_s)
                for e in self.entries
            ],
        }


def run_contestant(
    contestant: Contestant,
    make_step: Callable[[Contestant], Step],
    skip: Callable[[Contestant], str | None],
    plan: RacePlan,
    cap_s: float,
    clock: Callable[[], float],
) -> Entry:
    """Warm-up, then timed steps until `plan.steps` or `cap_s`; every clock read is synchronised."""
    if reason := skip(contestant):
        return Entry(contestant.name, "skipped", reason=reason)
    try:
        step = make_step(contestant)
        warm_start_s = clock()
        # a step slower than the cap warms up once, paying the one-time costs
        for _ in range(plan.warmup_steps):
            step()
            if clock() - warm_start_s >= cap_s:
                break
        # the sync drains the warm-up's queued work before the first timed step
        start_s = clock()
        steps, elapsed_s = 0, 0.0
        while steps < plan.steps and elapsed_s < cap_s:
            step()
            steps += 1
            elapsed_s = clock() - start_s
    # a contestant that fails is out of the race, not the run
    except Exception as error:
        return Entry(contestant.name, "skipped", reason=f"failed: {one_line(error)}")
    return Entry(contestant.name, "ok", steps, elapsed_s)


def race(
    contestants: tuple[Contestant, ...],
    make_step: Callable[[Contestant], Step],
    skip: Callable[[Contestant], str | None],
    plan: RacePlan,
    clock: Callable[[], float],
    key: str,
    budget_s: float | None = None,
) -> RaceResult:
    """Every contestant in turn. Under a budget each gets an equal part of `budget_s`, half for its
    warm-up and half for its timed steps (each at most the plan's cap); a contestant that would
    start after `budget_s` is skipped."""
    cap_s = (
        plan.cap_s if budget_s is None else min(plan.cap_s, budget_s / max(1, 2 * len(contestants)))
    )
    if cap_s < MIN_CAP_S:
        return RaceResult(
            key, (), note=f"not raced: {budget_s:.2g} s of the budget left for it", complete=False
        )
    start_s, entries, cut = clock(), [], False
    for contestant in contestants:
        # warm-ups and slow steps ran past the parts
        if budget_s is not None and clock() - start_s >= budget_s:
            entries.append(
                Entry(
                    contestant.name,
                    "skipped",
                    reason=f"the race's {budget_s:.2g} s of the budget was spent",
                )
            )
            cut = True
        else:
            entries.append(run_contestant(contestant, make_step, skip, plan, cap_s, clock))
    note = (
        ""
        if any(e.status == "ok" for e in entries)
        else f"no contestant finished: {FALLBACK.name} used"
    )
    return RaceResult(key, tuple(entries), note, complete=cap_s >= plan.cap_s and not cut)


def race_key(
    machine_id: str, device: torch.device, profile: str, contestants: tuple[Contestant, ...]
) -> str:
    """What the winner depends on: another machine, device, torch, profile or contestant list races
    again."""
    return "|".join(
        [
            machine_id,
            str(device),
            f"torch {torch.__version__}",
            str(profile),
            ",".join(c.name for c in contestants),
        ]
    )


def entry_defect(entry: object, plan: RacePlan) -> str | None:
    """Why a kept entry is not one `run_contestant` could have written under `plan` with its full
    cap, or None."""
    if not isinstance(entry, dict) or entry.get("name") not in {c.name for c in CONTESTANTS}:
        return f"an entry names no contestant ({str(entry)[:60]})"
    name, steps, seconds = entry["name"], entry.get("steps"), entry.get("seconds")
    if entry.get("samples_per_step") != RACE_BATCH:
        return f"{name}: not {RACE_BATCH} samples a step"
    if entry.get("status") == "skipped":
        reason = entry.get("reason")
        plausible = steps == 0 and isinstance(reason, str) and len(reason) <= MAX_TEXT_CHARS
        return None if plausible else f"{name}: an odd skip"
    if (
        entry.get("status") != "ok"
        or type(steps) is not int
        or not isinstance(seconds, (int, float))
        or entry.get("reason")
    ):
        return f"{name}: not an ok or skipped entry"
    if not (1 <= steps <= plan.steps and math.isfinite(seconds) and seconds >= steps * MIN_STEP_S):
        return f"{name}: {steps} steps in {seconds} s, impossible under the {plan.steps}-step plan"
    if steps < plan.steps and seconds < plan.cap_s:
        return (
            f"{name}: {steps} steps in {seconds:.3g} s, stopped before the plan's {plan.steps} "
            f"steps or {plan.cap_s} s"
        )
    return None


def kept_race(found: object, key: str, plan: RacePlan) -> RaceResult:
    """The complete race kept under `key`; ValueError naming what no race of this plan could
    hold."""
    if not isinstance(found, dict) or found.get("key") != key:
        raise ValueError("no race of this machine, device, torch and profile")
    if found.get("complete") is not True:
        # shown for the user, not reused
        raise ValueError("the kept race was cut short by a budget")
    entries, note = found.get("entries"), found.get("note", "")
    if not isinstance(entries, list) or not isinstance(note, str) or len(note) > MAX_TEXT_CHARS:
        raise ValueError("it holds no list of entries and short note")
    problem = next(filter(None, (entry_defect(e, plan) for e in entries)), None)
    names = [e["name"] for e in entries]
    if problem is None and len(set(names)) < len(names):
        problem = "a contestant entered twice"
    if problem is None and not any(e["status"] == "ok" for e in entries):
        problem = "no contestant finished"
    if problem:
        raise ValueError(problem)
    fields = ("name", "status", "steps", "seconds", "samples_per_step", "reason")
    return RaceResult(
        key,
        tuple(
            Entry(**{f: e.get(f, "") if f == "reason" else e[f] for f in fields}) for e in entries
        ),
        note,
        origin=f"kept from an earlier race on this machine ({RACE_FILE} in the results folder)",
    )


def load_cached(path: Path, key: str, plan: RacePlan) -> tuple[RaceResult | None, str]:
    """The race kept under `key` in `path`, or None and why it is not used ("" where none was
    kept)."""
    try:
        kept = read_json(path, MAX_FILE_BYTES, "epoch race file", own=True)
        if not isinstance(kept, dict) or key not in kept:
            return None, ""
        return kept_race(kept[key], key, plan), ""
    except FileNotFoundError:
        return None, ""
    except (OSError, ValueError) as error:
        return None, " ".join(str(error).split())[:MAX_TEXT_CHARS]


def save(path: Path, result: RaceResult) -> str:
    """Kept beside other machines' races, written through a rename (others may read it); why not
    kept, or ""."""
    try:
        kept = read_json(path, MAX_FILE_BYTES, "epoch race file", own=True) if path.exists() else {}
    except (OSError, ValueError):
        # a file not ours or not readable: our own replaces it
        kept = {}
    kept = dict(kept) if isinstance(kept, dict) else {}
    kept[result.key] = result.to_json()
    try:
        replace_bytes(
            path.parent,
            path.name,
            json.dumps(kept, indent=1, sort_keys=True).encode(),
            "epoch race file",
            "choose a --results-dir you can write",
        )
    except OSError as error:
        return f"not kept: {' '.join(str(error).split())[:MAX_TEXT_CHARS]}"
    return ""


def training_step(
    device: torch.device, clock: Any, images: torch.Tensor, labels: torch.Tensor
) -> Callable[[Contestant], Step]:
    """A contestant's step: a fresh CNN and optimizer in its precision and memory format, on one
    batch."""

    def make(contestant: Contestant) -> Step:
        trainer = Trainer(
            make_model("cnn"),
            device,
            contestant.precision,
            channels_last=contestant.channels_last,
            clock=clock,
        )
        batch = (images[:RACE_BATCH].to(device), labels[:RACE_BATCH].to(device))
        return lambda: trainer.step([batch])

    return make


# this process's races by key: the second consumer of a build reads the first's
_RACED: dict[str, RaceResult] = {}


def race_here(ctx: BuildContext) -> RaceResult:
    """The race for this machine, device and profile: this process's, else the one kept in the
    results folder, else run now on the dataset's first batch (under --budget within RACE_SHARE_FRAC
    of the case's share) and kept."""
    key = race_key(ctx.machine_id(), ctx.device, str(ctx.profile), CONTESTANTS)
    path = ctx.results_dir / RACE_FILE if ctx.results_dir is not None else None
    plan = RACE_PLANS[str(ctx.profile)]
    found, refused = _RACED.get(key), ""
    if found is None and path is not None:
        found, refused = load_cached(path, key, plan)
    if found is None:
        images, labels = ctx.data.preloaded(True, torch.device("cpu"))
        budget_s = ctx.share.left_s() * RACE_SHARE_FRAC if ctx.share is not None else None
        found = race(
            CONTESTANTS,
            training_step(ctx.device, ctx.clock, images, labels),
            lambda contestant: precision_skip_reason(contestant.precision, ctx.device),
            plan,
            ctx.clock,
            key,
            budget_s,
        )
        # reused later only if complete
        unkept = save(path, found) if path is not None and found.entries else ""
        why = "; ".join(
            filter(None, [f"the kept race was not used: {refused}" if refused else "", unkept])
        )
        found = replace(found, origin=RACED_HERE + (f" ({why})" if why else ""))
    _RACED[key] = found
    return found


def apply_winner(case: Any, result: RaceResult) -> Any:
    """A raced case with the winner's precision and memory format (its other settings kept)."""
    return replace(
        case, precision=result.winner.precision, channels_last=result.winner.channels_last
    )


def raced_figures(
    figures: Callable[..., dict[str, Any]], case: Any, result: RaceResult
) -> Callable[..., dict[str, Any]]:
    """A raced case's row: the settings that ran, and the race's figures in its reason (why they
    were chosen)."""

    def wrapped(*args: Any) -> dict[str, Any]:
        row = figures(*args)
        row.update(precision=case.precision, channels_last=case.channels_last)
        row["reason"] = "; ".join(filter(None, [str(row.get("reason") or ""), result.summary()]))
        return row

    return wrapped
