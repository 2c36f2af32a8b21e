"""The datasheet peaks a figure is set against (gpubench.harness.core.peaks)."""

from __future__ import annotations

import pytest

from gpubench.harness.core.peaks import peak_gbps, peak_tflops


@pytest.mark.parametrize(
    "name, bf16, gbps",
    [
        ("NVIDIA H200", 989.4, 4800),
        ("NVIDIA H200 NVL", 835.5, 4800),
        ("NVIDIA H100 80GB HBM3", 989.4, 3350),
        ("NVIDIA H100 NVL", 835.5, 3900),
        ("NVIDIA H100 PCIe", 756.0, 2000),
    ],
)
def test_each_card_takes_its_own_datasheet_not_the_sxm_part_its_name_begins_with(
    name, bf16, gbps
) -> None:
    assert (peak_tflops(name, "bf16"), peak_gbps(name)) == (bf16, gbps)
