"""What a workload declares about itself (torch-free): case ids, builds, columns, headline figures
and report. The report, reader and case ids read these (harness.catalog), so adding a workload never
edits them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable, Mapping

from gpubench.harness.core.columns import Column


def pow2_size(n: int) -> str:
    return f"2^{n.bit_length() - 1}" if n > 0 and n & (n - 1) == 0 else str(n)


def bytes_size(n: int) -> str:
    for scale, unit in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return f"{n}B"


def _flag(on: str, off: str) -> Callable[[Any], str]:
    return lambda value: on if value else off


def n_size(n: int) -> str:
    return f"n{n}"


# How a setting reads inside an id, by column name (any workload may use them).
TOKENS: dict[str, Callable[[Any], str]] = {
    "batch_size": lambda v: f"bs{v}",
    # module:function: no ':' inside a pytest id
    "model": lambda v: str(v).replace(":", "."),
    # 256 ids<50304 (--input-ids): 256-ids50304
    "input_shape": lambda v: str(v).replace(" ids<", "-ids"),
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
    "raced": _flag("raced", "fixed"),
    "cudnn_benchmark": _flag("cudnnbench", "nocudnnbench"),
    "seq_len": lambda v: f"s{v}",
    "causal": _flag("causal", "noncausal"),
    "heads": lambda v: f"h{v}",
    "head_dim": lambda v: f"d{v}",
}


@dataclass(frozen=True)
class IdRule:
    """Short case ids from typed settings (`mnist_epoch/preloaded-bf16-cl-bs1024`): None settings
    never appear, defaults only if in `always`, the rest joined with "-" in `order`; all defaults
    give `label`."""

    order: tuple[str, ...]
    defaults: Mapping[str, Any] = field(default_factory=dict)
    always: frozenset[str] = frozenset()
    label: str = "defaults"
    size_token: Callable[[int], str] = str

    def token(self, name: str, value: Any) -> str:
        if name == "size":
            return self.size_token(int(value))
        return TOKENS.get(name, str)(value)

    def short_id(self, settings: Mapping[str, Any]) -> str:
        used = {k: settings.get(k) for k in self.order if settings.get(k) is not None}
        changed = [
            k
            for k in self.order
            if k in used and (k not in self.defaults or used[k] != self.defaults[k])
        ]
        if not changed and all(settings.get(k) == v for k, v in self.defaults.items()):
            return self.label
        shown = [k for k in self.order if k in used and (k in changed or k in self.always)]
        return "-".join(self.token(k, used[k]) for k in shown) or self.label


@dataclass(frozen=True)
class PlotSpec:
    """A panel per machine (and per `panels` value): `y` against `x`, a line per `hue` value (one or
    several columns); with `bars`, a horizontal bar of `y` per `x` (settings, not a ladder),
    coloured by `hue`."""

    x: str
    y: str
    hue: str | tuple[str, ...] | None = None
    logx: bool = False
    logy: bool = False
    bars: bool = False
    panels: tuple[str, ...] = ()

    @property
    def hues(self) -> tuple[str, ...]:
        return (self.hue,) if isinstance(self.hue, str) else tuple(self.hue or ())


@dataclass(frozen=True)
class ReportSection:
    """How the report shows a workload: `renderer` names its own section in
    reports/render/sections.py; without one, the report draws `plot` and a table of `table`'s
    columns (medians over builds and runs)."""

    title: str
    intro: str = ""
    table: tuple[str, ...] = ()
    plot: PlotSpec | None = None
    renderer: str | None = None
    # place in the report (lower first)
    order: int = 100
    # a setting column whose values share one cell per row of the other settings in a table of
    # several machines: "grad 11.1 k samples/s · no_grad 12.6 k samples/s"
    fold: str | None = None


@dataclass(frozen=True)
class SummaryFigure:
    """A row of the report's summary per machine: among cases matching `where` (at the largest
    `at_largest`), the steadiest best `figure`; `text` (a format template or a function) writes its
    cell, then the builds' spread."""

    label: str
    figure: str
    text: str | Callable[[Mapping[str, Any]], str]
    where: Mapping[str, Any] = field(default_factory=dict)
    at_largest: str | None = None

    def cell(self, best: Mapping[str, Any]) -> str:
        return self.text.format(**best) if isinstance(self.text, str) else self.text(best)


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    id_rule: IdRule
    # per profile; None: the profile's default builds
    builds: Mapping[str, int] | None = None
    # pytest markers of every case (slow, training, distributed, gpu)
    markers: tuple[str, ...] = ()
    # (column, format) for the one-line terminal summary
    headlines: tuple[tuple[str, str], ...] = ()
    # columns this workload adds to the results schema
    columns: tuple[Column, ...] = ()
    report: ReportSection | None = None
    # rows this workload adds to the report's summary
    summary: tuple[SummaryFigure, ...] = ()
