"""The interconnect: collectives timed across ranks, with nccl-tests' figures (its PERFORMANCE.md).
busbw scales algbw (size / time) by the share each rank sends or receives, so it compares with the
link's speed."""

from __future__ import annotations

from gpubench.harness.core.columns import Column
from gpubench.harness.core.workload_spec import (
    IdRule,
    PlotSpec,
    ReportSection,
    SummaryFigure,
    WorkloadSpec,
    bytes_size,
)

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "sendrecv")
# Ops whose buffer is cut into one chunk per rank: their size is rounded down to a multiple of the
# ranks.
CHUNKED_OPS = frozenset({"all_gather", "reduce_scatter", "all_to_all"})
# fp32, nccl-tests' default type
ELEMENT_BYTES = 4


def bus_factor(op: str, world_size: int) -> float:
    """busbw / algbw in nccl-tests: an all_reduce (a reduce-scatter then an all-gather) moves
    2(n-1)/n of its size through each rank's link; the chunked ops (n-1)/n; broadcast and sendrecv
    the size itself."""
    n = world_size
    if n < 1:
        raise ValueError(f"world_size must be at least 1, not {n}")
    factors = {
        "all_reduce": 2 * (n - 1) / n,
        "all_gather": (n - 1) / n,
        "reduce_scatter": (n - 1) / n,
        "all_to_all": (n - 1) / n,
        "broadcast": 1.0,
        "sendrecv": 1.0,
    }
    if op not in factors:
        raise ValueError(f"unknown collective {op!r}: use one of {', '.join(OPS)}")
    return factors[op]


def elements(op: str, size_bytes: int, world_size: int) -> int:
    """fp32 elements of the size as nccl-tests counts it (all_gather's whole output,
    reduce_scatter's whole input), chunked ops rounded down to a multiple of the ranks; 0 when the
    size holds less than one per chunk."""
    count = size_bytes // ELEMENT_BYTES
    return count // world_size * world_size if op in CHUNKED_OPS else count


def algbw_gbps(size_bytes: int, seconds: float) -> float:
    """In GB/s (10^9 bytes/s)."""
    if seconds <= 0:
        raise ValueError(f"a collective cannot take {seconds} s")
    return size_bytes / seconds / 1e9


SPEC = WorkloadSpec(
    name="collectives",
    id_rule=IdRule(
        ("op", "dtype", "size", "world_size", "backend"),
        defaults={"dtype": "fp32"},
        size_token=bytes_size,
    ),
    # one launch times the whole ladder; its rounds give the spread
    builds={"smoke": 1, "quick": 1, "full": 3},
    markers=("slow", "distributed"),
    headlines=(("busbw_gbps", "busbw {:.3g} GB/s"), ("algbw_gbps", "algbw {:.3g} GB/s")),
    columns=(
        Column("algbw_gbps", "float", "figure", "GB/s"),
        Column("busbw_gbps", "float", "figure", "GB/s"),
        Column("wrong_elements", "int", "figure"),
    ),
    report=ReportSection(
        "Collectives (interconnect)",
        intro="nccl-tests' figures from torch.distributed (gloo on cpu, nccl on cuda), fp32: the "
        "time of one call is the slowest rank's (ranks start each round together at a barrier), "
        "`algbw` = size / time, `busbw` = algbw x 2(n-1)/n for all_reduce, (n-1)/n for "
        "all_gather, reduce_scatter and all_to_all, x1 for broadcast and sendrecv (each rank "
        "sends to the next and receives from the previous). Every size's result is checked "
        "element by element: a wrong one is a failed row (under Rows not ok). Small sizes measure "
        "latency, large ones the link.",
        table=("machine", "setting", "median_s", "algbw_gbps", "busbw_gbps", "spread", "flags"),
        plot=PlotSpec(x="size", y="busbw_gbps", hue="op", logx=True, logy=True),
        order=105,
    ),
    summary=(
        SummaryFigure(
            "all_reduce busbw, largest size",
            "busbw_gbps",
            "{busbw_gbps:.3g} GB/s ({setting})",
            where={"op": "all_reduce"},
            at_largest="size",
        ),
    ),
)
