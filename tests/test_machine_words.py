"""Words about this machine are measured on it, and the console never cuts a reason inside a
word."""

from __future__ import annotations

import pytest
import torch

from gpubench.harness.pytest_plugin.console import SKIP_LINE_CHARS, shortened
from gpubench.harness.workloads.common import train_loop


def test_the_fp16_skip_reason_states_the_matmuls_measured_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    measured = {torch.float16: 41.5, torch.float32: 0.208}
    monkeypatch.setattr(train_loop, "cpu_matmul_ms", lambda dtype: measured[dtype])
    reason = train_loop.precision_skip_reason("fp16", torch.device("cpu"))
    assert reason is not None and "took 41.5 ms against 0.208 ms in fp32 here" in reason
    assert "64 s" not in reason


def test_the_cpu_matmul_is_timed_once_per_dtype() -> None:
    first = train_loop.cpu_matmul_ms(torch.float32)
    assert first > 0 and train_loop.cpu_matmul_ms(torch.float32) == first


WORDS = (
    "skipped 12: the CPU-vs-GPU speedup needs an accelerator; --device is cpu and this machine "
    "has no other device torch can use for it"
)


@pytest.mark.parametrize("cases", [1, 12, 60])
def test_a_skip_reason_is_cut_after_a_whole_word(cases: int) -> None:
    tail = " (" + ", ".join(f"matmul_speedup/fp32-n{n}" for n in range(cases)) + ")"
    line = shortened("  " + WORDS, tail)
    assert len(line) <= SKIP_LINE_CHARS
    reason = line.split(" (matmul_speedup")[0].removesuffix("…")
    assert WORDS.startswith(reason.strip()) and len(reason) > SKIP_LINE_CHARS // 3
    # the cut falls between words
    assert reason.strip() == WORDS or WORDS[len(reason.strip())] == " "
