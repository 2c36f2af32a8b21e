"""Test doubles shared by the unit tests."""

from __future__ import annotations

from typing import Any, Callable


class FakeStats:
    def __init__(self) -> None:
        self.data: list[float] = []


class FakeMetadata:
    def __init__(self) -> None:
        self.stats = FakeStats()


class FakeBenchmark:
    """Stands in for pytest-benchmark's fixture: pedantic() runs the rounds and records the
    per-call samples given (a fake clock), so statistics can be checked by hand."""

    def __init__(self, samples_s: list[float] | None = None) -> None:
        self.samples_s = samples_s or [0.001, 0.002, 0.003]
        self.extra_info: dict[str, Any] = {}
        self.disabled = False
        self.group = None
        self.stats: FakeMetadata | None = None
        self.calls: list[tuple[int, int]] = []

    def pedantic(self, target: Callable[[], Any], rounds: int, iterations: int, warmup_rounds: int = 0) -> Any:
        self.calls.append((rounds, iterations))
        self.stats = FakeMetadata()
        result = None
        for i in range(rounds):
            for _ in range(iterations):
                result = target()
            self.stats.stats.data.append(self.samples_s[i % len(self.samples_s)])
        return result
