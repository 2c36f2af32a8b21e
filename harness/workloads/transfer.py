"""Host<->device copies: GB/s over sizes, pageable vs pinned, blocking vs non_blocking."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from gpubench.harness.measurement.cases import Case, CaseSkipped
from gpubench.harness.catalog.transfer import SPEC
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.measurement.measure import Timed
from gpubench.harness.core.stats import SampleStats
from gpubench.harness.budget.cost_model import Work
from gpubench.harness.measurement.workload import Workload

MIB = 2**20
LADDERS: dict[str, tuple[int, ...]] = {
    "smoke": (MIB,),
    "quick": (MIB, 64 * MIB, 256 * MIB),
    "full": (64 * 1024, MIB, 16 * MIB, 64 * MIB, 256 * MIB, 1024 * MIB),
}


@dataclass(frozen=True)
class TransferCase(Case):
    workload: ClassVar[str] = "transfer"
    # h2d | d2h
    direction: str
    # bytes
    size: int
    pinned: bool
    non_blocking: bool


def cases(ctx: BuildContext) -> list[TransferCase]:
    return [
        TransferCase(direction, size, pinned, non_blocking)
        for direction in ("h2d", "d2h")
        for size in LADDERS[ctx.profile]
        for pinned in (False, True)
        for non_blocking in (False, True)
    ]


def skip_reason(case: TransferCase, device: torch.device) -> str | None:
    if device.type == "cpu":
        return "host<->device transfer needs an accelerator; --device is cpu"
    if case.pinned and device.type != "cuda":
        return f"pinned host memory is a CUDA feature; not measured on {device.type}"
    return None


def set_up(case: TransferCase, ctx: BuildContext) -> Timed:
    device = ctx.device
    if reason := skip_reason(case, device):
        raise CaseSkipped(reason)
    host = torch.empty(case.size, dtype=torch.uint8, pin_memory=case.pinned)
    host.random_(0, 255)
    on_device = torch.empty(case.size, dtype=torch.uint8, device=device)
    if case.direction == "h2d":
        fn = lambda: on_device.copy_(host, non_blocking=case.non_blocking)  # noqa: E731
    else:
        fn = lambda: host.copy_(on_device, non_blocking=case.non_blocking)  # noqa: E731
    notes = (
        []
        if case.pinned or not case.non_blocking
        else ["non_blocking from pageable memory is staged synchronously by the driver"]
    )

    def figures(stats: SampleStats, _result: Any) -> dict[str, Any]:
        return {"gbps": case.size / stats.median_s / 1e9}

    return Timed(fn=fn, figures=figures, notes=notes)


def headline(cases: list[TransferCase]) -> list[TransferCase]:
    """Host to device, pinned and asynchronous, at the largest size: the summary's transfer row."""
    pinned = [c for c in cases if c.direction == "h2d" and c.pinned and c.non_blocking]
    return [max(pinned, key=lambda c: c.size)] if pinned else []


# a PCIe 4/5 x16 link's order: the device's memory rate does not bound a copy
HOST_LINK_BYTES_PER_S = 20e9


def work(case: TransferCase, ctx: BuildContext) -> Work:
    if skip_reason(case, ctx.device):
        # a skipped row, at once
        return Work(launches=0, calls=0)
    return Work(host_s=case.size / HOST_LINK_BYTES_PER_S, fresh_bytes=2 * case.size)


WORKLOAD = Workload(SPEC, cases, set_up, headline, work)
