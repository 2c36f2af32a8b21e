"""The six collectives as nccl-tests sizes them: a rank's buffers, the call, and the result every
rank must hold (nccl-tests' `#wrong` check). Inputs are small integers that differ per rank and
offset, so sums are exact in fp32 and a misplaced chunk, a missing or doubled contribution, or a
stale buffer leaves elements that differ."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

# torch 2.14 renamed the single-tensor gather and scatter (the old names warn); older torch has only
# those.
gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
scatter_single = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


@dataclass(frozen=True)
class Ranks:
    rank: int
    world_size: int


@dataclass
class Buffers:
    # what this rank contributes
    source: torch.Tensor
    # what the collective leaves on this rank (the source itself for in-place calls)
    result: torch.Tensor


def cycle_of_five(start: int, count: int, device: torch.device) -> torch.Tensor:
    """g % 5 for g in start..start+count, as fp32, beside one int32 index (an int64 arange and its
    remainder would be four times the result: the collectives' memory check counts on this)."""
    index = torch.arange(
        start,
        start + count,
        device=device,
        dtype=torch.int32 if start + count < 2**31 else torch.int64,
    )
    return index.remainder_(5).to(torch.float32)


def pattern(rank: int, start: int, count: int, device: torch.device) -> torch.Tensor:
    """Rank r's element g holds r + 1 + g % 5."""
    return cycle_of_five(start, count, device).add_(rank + 1)


def summed(start: int, count: int, world_size: int, device: torch.device) -> torch.Tensor:
    """Elements start.. of the sum of every rank's pattern: n(n+1)/2 + n(g % 5)."""
    n = world_size
    return cycle_of_five(start, count, device).mul_(n).add_(n * (n + 1) // 2)


@dataclass(frozen=True)
class Collective:
    """`count`: the operation's elements as gpubench.harness.catalog.collectives.elements counts
    them."""

    name: str
    make: Callable[[int, Ranks, torch.device], Buffers]
    call: Callable[[Buffers, Ranks], None]
    expected: Callable[[int, Ranks, torch.device], torch.Tensor]
    # Sums into its own input: timed on zeros, since the pattern grows n-fold per call and overflows
    # within a few hundred calls; zeros stay zeros for the same work.
    in_place_sum: bool = False


def _in_place(count: int, ranks: Ranks, device: torch.device) -> Buffers:
    source = pattern(ranks.rank, 0, count, device)
    return Buffers(source, source)


def _gather_buffers(count: int, ranks: Ranks, device: torch.device) -> Buffers:
    return Buffers(
        pattern(ranks.rank, 0, count // ranks.world_size, device), torch.empty(count, device=device)
    )


def _scatter_buffers(count: int, ranks: Ranks, device: torch.device) -> Buffers:
    return Buffers(
        pattern(ranks.rank, 0, count, device), torch.empty(count // ranks.world_size, device=device)
    )


def _exchange_buffers(count: int, ranks: Ranks, device: torch.device) -> Buffers:
    return Buffers(pattern(ranks.rank, 0, count, device), torch.empty(count, device=device))


def _sendrecv(buffers: Buffers, ranks: Ranks) -> None:
    """nccl-tests' sendrecv: each rank sends to the next and receives from the previous, at once."""
    n = ranks.world_size
    ops = [
        dist.P2POp(dist.isend, buffers.source, (ranks.rank + 1) % n),
        dist.P2POp(dist.irecv, buffers.result, (ranks.rank - 1) % n),
    ]
    for work in dist.batch_isend_irecv(ops):
        work.wait()


def _gathered(count: int, ranks: Ranks, device: torch.device) -> torch.Tensor:
    chunk = count // ranks.world_size
    return torch.cat([pattern(peer, 0, chunk, device) for peer in range(ranks.world_size)])


def _scattered(count: int, ranks: Ranks, device: torch.device) -> torch.Tensor:
    """This rank's chunk of the sum."""
    chunk = count // ranks.world_size
    return summed(ranks.rank * chunk, chunk, ranks.world_size, device)


def _exchanged(count: int, ranks: Ranks, device: torch.device) -> torch.Tensor:
    """Chunk p of the result is peer p's chunk for this rank."""
    chunk = count // ranks.world_size
    return torch.cat(
        [pattern(peer, ranks.rank * chunk, chunk, device) for peer in range(ranks.world_size)]
    )


COLLECTIVES: dict[str, Collective] = {
    c.name: c
    for c in (
        Collective(
            "all_reduce",
            _in_place,
            lambda b, r: dist.all_reduce(b.result),
            lambda count, r, device: summed(0, count, r.world_size, device),
            in_place_sum=True,
        ),
        Collective(
            "all_gather", _gather_buffers, lambda b, r: gather_single(b.result, b.source), _gathered
        ),
        Collective(
            "reduce_scatter",
            _scatter_buffers,
            lambda b, r: scatter_single(b.result, b.source),
            _scattered,
        ),
        Collective(
            "broadcast",
            _in_place,
            lambda b, r: dist.broadcast(b.result, src=0),
            lambda count, r, device: pattern(0, 0, count, device),
        ),
        Collective(
            "all_to_all",
            _exchange_buffers,
            lambda b, r: dist.all_to_all_single(b.result, b.source),
            _exchanged,
        ),
        Collective(
            "sendrecv",
            _exchange_buffers,
            _sendrecv,
            lambda count, r, device: pattern((r.rank - 1) % r.world_size, 0, count, device),
        ),
    )
}


def mismatch(result: torch.Tensor, expected: torch.Tensor) -> tuple[int, int, float, float]:
    """One rank's `#wrong`: (elements that differ, the first one's index, its value, the expected
    value); (0, -1, 0, 0) when right. A NaN never equals its expectation."""
    wrong = result != expected
    # not wrong.sum(): a sum of bools is made in int64, twice the buffer
    count = int(torch.count_nonzero(wrong))
    if count == 0:
        return 0, -1, 0.0, 0.0
    first = int(torch.argmax(wrong.to(torch.uint8)))
    return count, first, float(result[first]), float(expected[first])
