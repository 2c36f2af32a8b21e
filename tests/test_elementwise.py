"""Elementwise bandwidth: the DRAM case follows STREAM's rule (each array >= 4x the last-level
cache, every instance summed), read from sysfs on a CPU; rows name their memory tier and the cache
it was judged against."""

import pytest
import torch

from gpubench.harness.core.stats import summarize
from gpubench.harness.devices.device import cache_size_bytes, total_llc_bytes
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.measurement.timing import SyncedClock
from gpubench.harness.workloads import elementwise

CPU = torch.device("cpu")
MiB, GiB = 2**20, 2**30
FP32, BF16 = 4, 2


def write_cache(
    root, cpu: int, index: int, level: int, kind: str, size: str, shared: str | None
) -> None:
    folder = root / f"cpu{cpu}" / "cache" / f"index{index}"
    folder.mkdir(parents=True)
    (folder / "level").write_text(f"{level}\n")
    (folder / "type").write_text(f"{kind}\n")
    (folder / "size").write_text(f"{size}\n")
    if shared is not None:
        (folder / "shared_cpu_list").write_text(f"{shared}\n")


def fake_cpus(root, l3_groups: list[list[int]], l3_size: str = "32768K") -> None:
    """Each CPU with its own L1d, L1i and L2, and the L3 its group shares (shared_cpu_list
    '0-1')."""
    for cpus in l3_groups:
        for cpu in cpus:
            write_cache(root, cpu, 0, 1, "Data", "32K", str(cpu))
            write_cache(root, cpu, 1, 1, "Instruction", "32K", str(cpu))
            write_cache(root, cpu, 2, 2, "Unified", "1024K", str(cpu))
            write_cache(root, cpu, 3, 3, "Unified", l3_size, f"{cpus[0]}-{cpus[-1]}")


def test_the_last_level_cache_is_every_instance_of_the_top_level_summed_once(tmp_path):
    one = tmp_path / "one"
    # this VM: one 32 MiB L3 both CPUs share
    fake_cpus(one, [[0, 1]])
    assert total_llc_bytes(one) == 32 * MiB
    two = tmp_path / "two"
    # two sockets: each brings its own
    fake_cpus(two, [[0, 1], [2, 3]], l3_size="16M")
    assert total_llc_bytes(two) == 32 * MiB
    # no L3: the L2s are the last level, one per CPU
    private = tmp_path / "private"
    for cpu in (0, 1):
        write_cache(private, cpu, 0, 1, "Data", "48K", str(cpu))
        write_cache(private, cpu, 1, 2, "Unified", "2048K", str(cpu))
    assert total_llc_bytes(private) == 4 * MiB


def test_an_unreadable_cache_tree_says_nothing_rather_than_a_smaller_cache(tmp_path):
    assert total_llc_bytes(tmp_path / "absent") is None
    odd = tmp_path / "odd"
    # an instruction cache holds no data
    write_cache(odd, 0, 0, 1, "Instruction", "32K", "0")
    # a size that is no size
    write_cache(odd, 0, 1, 3, "Unified", "lots", "0")
    assert total_llc_bytes(odd) is None
    # no shared_cpu_list: each CPU's counted as its own (larger arrays, never smaller)
    unshared = tmp_path / "unshared"
    write_cache(unshared, 0, 0, 3, "Unified", "8M", None)
    write_cache(unshared, 1, 0, 3, "Unified", "8M", None)
    assert total_llc_bytes(unshared) == 16 * MiB
    assert cache_size_bytes("1M") == MiB and cache_size_bytes("512") == 512
    assert cache_size_bytes(" 32768k\n") == 32 * MiB


@pytest.mark.parametrize(
    ("cache_bytes", "element_bytes", "elements"),
    [
        # this VM's L3: each fp32 array 128 MiB, 4x it (2^24 was 2x)
        (32 * MiB, FP32, 2**25),
        # the rule is in bytes per array
        (32 * MiB, BF16, 2**26),
        # up to the next power of two
        (33 * MiB, FP32, 2**26),
        # an H100's L2: 2^25 (128 MiB) is under 4x it
        (50 * MiB, FP32, 2**26),
        # two L3 instances
        (2 * 32 * MiB, FP32, 2**26),
    ],
)
def test_the_dram_case_is_the_smallest_power_of_two_with_each_array_4x_the_cache(
    cache_bytes, element_bytes, elements
):
    size = elementwise.dram_elements(cache_bytes, element_bytes, memory_bytes=256 * GiB)
    assert size == elementwise.DramSize(elements, "")
    assert elements * element_bytes >= 4 * cache_bytes > elements // 2 * element_bytes


def test_an_unknown_cache_falls_back_to_a_safe_size_and_says_so():
    size = elementwise.dram_elements(None, FP32, memory_bytes=256 * GiB)
    assert (
        size.elements == 2**26
        and "last-level cache unknown" in size.note
        and "256 MiB" in size.note
    )
    assert (
        elementwise.dram_elements(
            None, FP32, 256 * GiB, elementwise.UNKNOWN_CACHE_ARRAY_BYTES["mps"]
        ).elements
        == 2**27
    )


def test_a_size_the_memory_cannot_hold_is_capped_and_said():
    """Three arrays and randn's fp32 draw within a quarter of the memory: 1 GiB holds 2^24 fp32
    elements per array."""
    size = elementwise.dram_elements(32 * MiB, FP32, memory_bytes=1 * GiB)
    assert size.elements == 2**24 and "below STREAM's 4x the 32 MiB last-level cache" in size.note
    # memory unknown: the rule
    assert elementwise.dram_elements(32 * MiB, FP32, memory_bytes=None).elements == 2**25


def test_the_memory_tier_is_streams_rule_per_array():
    assert elementwise.memory_tier(128 * MiB, 384 * MiB, 32 * MiB) == "dram"
    # the old DRAM case on this VM
    assert elementwise.memory_tier(64 * MiB, 192 * MiB, 32 * MiB) == "mixed"
    assert elementwise.memory_tier(4 * MiB, 12 * MiB, 32 * MiB) == "cache"
    assert elementwise.memory_tier(128 * MiB, 384 * MiB, None) == "unknown"


def test_the_ladder_ends_at_this_devices_dram_case(monkeypatch):
    monkeypatch.setattr(elementwise, "last_level_cache_bytes", lambda device: 32 * MiB)
    ids = [case.case_id for case in elementwise.cases(BuildContext(CPU, "quick", SyncedClock(CPU)))]
    assert ids == [
        "elementwise/add-fp32-2^20",
        "elementwise/add-fp32-2^25",
        "elementwise/relu-fp32-2^20",
        "elementwise/relu-fp32-2^25",
    ]
    assert [
        c.size
        for c in elementwise.headline(
            elementwise.cases(BuildContext(CPU, "quick", SyncedClock(CPU)))
        )
    ] == [2**25]
    full = elementwise.cases(BuildContext(CPU, "full", SyncedClock(CPU)))
    assert {c.size for c in full if c.dtype == "bf16"} >= {2**26} and 2**25 in {
        c.size for c in full
    }


def test_a_row_names_its_tier_the_cache_it_was_judged_against_and_a_fallback(monkeypatch):
    ctx = BuildContext(CPU, "quick", SyncedClock(CPU))
    # the DRAM case: 2^18
    monkeypatch.setattr(elementwise, "last_level_cache_bytes", lambda device: MiB // 4)
    figures = elementwise.set_up(elementwise.ElementwiseCase("add", "fp32", 2**18), ctx).figures(
        summarize([1e-3]), None
    )
    assert (figures["memory_tier"], figures["llc_total_bytes"], figures["reason"]) == (
        "dram",
        MiB // 4,
        "",
    )
    monkeypatch.setattr(elementwise, "last_level_cache_bytes", lambda device: None)
    # a small fallback: the DRAM case is 2^18
    monkeypatch.setattr(elementwise, "DEFAULT_UNKNOWN_ARRAY_BYTES", MiB)
    figures = elementwise.set_up(elementwise.ElementwiseCase("add", "fp32", 2**18), ctx).figures(
        summarize([1e-3]), None
    )
    assert figures["memory_tier"] == "unknown" and figures["llc_total_bytes"] is None
    assert figures["reason"].startswith(
        "last-level cache unknown: each array 1 MiB assumed DRAM-resident"
    )
    other = elementwise.set_up(elementwise.ElementwiseCase("add", "fp32", 2**16), ctx).figures(
        summarize([1e-3]), None
    )
    # said on the DRAM case only
    assert other["reason"] == ""
