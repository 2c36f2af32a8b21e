"""The one case-id scheme: short, readable ids built from a case's typed settings.

Torch-free, so the results reader can rebuild the ids of older files and reports can label a row
from its settings without parsing strings. `harness.cases.Case` uses it for every pytest id and
`case_id`. Example: `mnist_epoch/preloaded-bf16-cl-bs1024`, `transfer/h2d-64MiB-pinned-nb`.

Rules: a setting that is None (the case does not use it) never appears; a setting equal to its
workload's default is left out; what remains is joined with "-" in the workload's order. A case
whose settings are all defaults is named by its label (`guide-template`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping


def _pow2(n: int) -> str:
    return f"2^{n.bit_length() - 1}" if n > 0 and n & (n - 1) == 0 else str(n)


def _bytes(n: int) -> str:
    for scale, unit in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return f"{n}B"


def _flag(on: str, off: str) -> Callable[[Any], str]:
    return lambda value: on if value else off


TOKENS: dict[str, Callable[[Any], str]] = {
    "batch_size": lambda v: f"bs{v}",
    "num_workers": lambda v: f"w{v}",
    "prefetch_factor": lambda v: f"pf{v}",
    "accumulation_steps": lambda v: f"acc{v}",
    "world_size": lambda v: f"x{v}",
    "compile_mode": lambda v: "eager" if v == "none" else f"compile-{v}",
    "target_accuracy": lambda v: f"to{float(v):g}",
    "pinned": _flag("pinned", "pageable"),
    "non_blocking": _flag("nb", "blocking"),
    "pin_memory": _flag("pin", "nopin"),
    "persistent_workers": _flag("persist", "nopersist"),
    "channels_last": _flag("cl", "nocl"),
    "checkpointing": _flag("ckpt", "nockpt"),
    "freeze_features": _flag("freeze", "nofreeze"),
}


@dataclass(frozen=True)
class IdRule:
    order: tuple[str, ...]
    defaults: Mapping[str, Any] = field(default_factory=dict)
    always: frozenset[str] = frozenset()  # shown even at their default (unless every setting is)
    label: str = "defaults"
    size_token: Callable[[int], str] = str


# The guide's template epoch (§5); mnist_epoch.EpochCase's field defaults equal these (a test pins it).
GUIDE_TEMPLATE: dict[str, Any] = {
    "loader": "dataloader", "num_workers": 4, "pin_memory": True, "non_blocking": True, "persistent_workers": False,
    "prefetch_factor": None, "precision": "fp32", "channels_last": False, "compile_mode": "none", "checkpointing": False,
    "accumulation_steps": 1, "freeze_features": False, "batch_size": 256, "model": "cnn",
}

RULES: dict[str, IdRule] = {
    "matmul": IdRule(("dtype", "size"), size_token=lambda n: f"n{n}"),
    "matmul_speedup": IdRule(("dtype", "size"), size_token=lambda n: f"n{n}"),
    "selfcheck": IdRule(("dtype", "size"), size_token=lambda n: f"n{n}"),
    "elementwise": IdRule(("op", "dtype", "size"), size_token=_pow2),
    "transfer": IdRule(("direction", "size", "pinned", "non_blocking"), size_token=_bytes),
    "inference": IdRule(("model", "batch_size", "grad_mode")),
    "mnist_epoch": IdRule(tuple(GUIDE_TEMPLATE), GUIDE_TEMPLATE, frozenset({"loader"}), "guide-template"),
    "memory_strategies": IdRule(("strategy", "precision", "accumulation_steps", "batch_size"),
                                {"precision": "fp32", "accumulation_steps": 1}),
    "ddp": IdRule(("parallel", "world_size", "backend", "batch_size")),
    # the design's name is its identity (its settings are columns of the row): speedrun-to0.85
    "time_to_accuracy": IdRule(("design", "target_accuracy"), label="template"),
}


def _token(rule: IdRule, name: str, value: Any) -> str:
    if name == "size":
        return rule.size_token(int(value))
    return TOKENS.get(name, str)(value)


def short_id(workload: str, settings: Mapping[str, Any]) -> str:
    """The part of the case id after `workload/`."""
    rule = RULES.get(workload)
    if rule is None:  # a workload without a rule: every used setting as name=value
        return "-".join(f"{k}={v}" for k, v in settings.items() if v is not None) or "defaults"
    used = {k: settings.get(k) for k in rule.order if settings.get(k) is not None}
    changed = [k for k in rule.order if k in used and (k not in rule.defaults or used[k] != rule.defaults[k])]
    if not changed and all(settings.get(k) == v for k, v in rule.defaults.items()):
        return rule.label
    shown = [k for k in rule.order if k in used and (k in changed or k in rule.always)]
    return "-".join(_token(rule, k, used[k]) for k in shown) or rule.label


def case_id_for(workload: str, settings: Mapping[str, Any]) -> str:
    return f"{workload}/{short_id(workload, settings)}"
