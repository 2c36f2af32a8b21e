"""A real slowdown for `gpubench ab`'s side B: named torch callables made FACTOR times slower.

Each wrapped call runs the original, reads its own wall time, then busy-waits (FACTOR - 1) times that
time, less what the wrapper itself costs (measured once at install), so the call as a whole takes
FACTOR times as long. On the CPU an op returns when its work is done, so the call's own wall time
is its work. Nested calls (a module calling its submodules) are slowed once, at the outermost call,
so a model is slowed by FACTOR, not by FACTOR per layer.

Set on side B only, with this folder on its PYTHONPATH (sitecustomize.py here installs it):

    GPUBENCH_SLOW_TARGETS=torch.add                   # one case: elementwise add
    GPUBENCH_SLOW_TARGETS=torch.add,torch.clamp_min,torch.matmul,torch.nn.Module.__call__   # every case
    GPUBENCH_SLOW_FACTOR=1.10

The factor actually injected is measured, not assumed: scripts/ab-campaign verify."""

from __future__ import annotations

import functools
import importlib
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

Clock = Callable[[], float]
TARGETS_VARIABLE = "GPUBENCH_SLOW_TARGETS"
FACTOR_VARIABLE = "GPUBENCH_SLOW_FACTOR"
OVERHEAD_CALLS = 2000  # calls of a no-op through the wrapper: a stable median of a sub-microsecond cost


def busy_wait(seconds: float, clock: Clock = time.perf_counter) -> None:
    """Spin for `seconds`: a sleep gives the core away and wakes late by far more than a few microseconds."""
    end_s = clock() + seconds
    while clock() < end_s:
        pass


def slowed(fn: Callable[..., Any], factor: float, overhead_s: float = 0.0, clock: Clock = time.perf_counter,
           wait: Callable[[float], None] = busy_wait) -> Callable[..., Any]:
    """`fn` made `factor` times slower: after each outermost call, a wait of (factor - 1) x its time,
    less `overhead_s`."""
    depth = threading.local()

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if getattr(depth, "inside", False):  # a submodule's call inside a slowed model's call
            return fn(*args, **kwargs)
        depth.inside = True
        try:
            start_s = clock()
            result = fn(*args, **kwargs)
            extra_s = (factor - 1.0) * (clock() - start_s) - overhead_s
        finally:
            depth.inside = False
        if extra_s > 0:
            wait(extra_s)
        return result

    return wrapper


def wrapper_overhead_s(factor: float, calls: int = OVERHEAD_CALLS) -> float:
    """The median cost the wrapper adds to one call of a no-op (its clock reads, its frame)."""
    def nothing() -> None:
        return None

    wrapped = slowed(nothing, factor)
    costs = []
    for _ in range(calls):
        start_s = time.perf_counter()
        wrapped()
        middle_s = time.perf_counter()
        nothing()
        costs.append((time.perf_counter() - middle_s, middle_s - start_s))
    bare, through = (sorted(values)[len(values) // 2] for values in zip(*costs))
    return max(0.0, through - bare)


def resolve(target: str) -> tuple[Any, str]:
    """`torch.nn.Module.__call__` -> (the object holding it, the attribute's name)."""
    parts = target.split(".")
    for split in range(len(parts) - 1, 0, -1):
        try:
            owner: Any = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for name in parts[split:-1]:
            owner = getattr(owner, name)
        if hasattr(owner, parts[-1]):
            return owner, parts[-1]
    raise ValueError(f"{TARGETS_VARIABLE}: {target!r} names no callable — give dotted names such as torch.add")


def install(targets: list[str], factor: float) -> float:
    """Wraps every target in place; returns the wrapper's overhead subtracted from each wait."""
    if not factor >= 1.0:
        raise ValueError(f"{FACTOR_VARIABLE}={factor}: give a factor of 1 or more, such as 1.10")
    overhead_s = wrapper_overhead_s(factor)
    for target in targets:
        owner, name = resolve(target)
        setattr(owner, name, slowed(getattr(owner, name), factor, overhead_s))
    return overhead_s


def install_from_env(environ: dict[str, str] | None = None) -> None:
    """Installs what GPUBENCH_SLOW_TARGETS and GPUBENCH_SLOW_FACTOR name; nothing when the first is unset."""
    environ = os.environ if environ is None else environ
    targets = [t.strip() for t in environ.get(TARGETS_VARIABLE, "").split(",") if t.strip()]
    if not targets:
        return
    try:
        install(targets, float(environ.get(FACTOR_VARIABLE, "1.10")))
    except ValueError as error:
        sys.exit(f"slowdown: {error}")
