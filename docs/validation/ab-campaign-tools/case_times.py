"""One process's times of the campaign's twelve cases, by torch.utils.benchmark (a clock independent of
gpubench's): prints one JSON object, case id -> median seconds a call. The calls are the suite's own
(its workloads' ops, models and attention call), built as its quick CPU cases build them.

    python docs/validation/ab-campaign-tools/case_times.py [--seconds 0.5]

scripts/ab-campaign verify runs it in fresh processes, side A and side B in alternation."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

import torch
import torch.utils.benchmark as benchmark

from gpubench.harness.workloads.attention import AttentionCase, attention_call
from gpubench.harness.workloads.elementwise import OPS
from gpubench.harness.workloads.inference import GRAD_MODES
from gpubench.harness.workloads.models import make_model


def elementwise(op: str) -> Callable[[], Any]:
    a, b, out = (torch.randn(2**20) for _ in range(3))
    return lambda: OPS[op][0](a, b, out)


def matmul() -> Callable[[], Any]:
    a, b, out = (torch.randn(512, 512) for _ in range(3))
    return lambda: torch.matmul(a, b, out=out)


def inference(model_name: str, grad_mode: str) -> Callable[[], Any]:
    model, x, mode = make_model(model_name).eval(), torch.randn(1, 1, 28, 28), GRAD_MODES[grad_mode]

    def forward() -> None:
        with mode():
            model(x)
    return forward


def attention(backend: str, causal: bool) -> Callable[[], Any]:
    return attention_call(AttentionCase("fp32", "fwd", backend, causal, 64, 4, 4, 64), torch.device("cpu"))


def cases() -> dict[str, Callable[[], Callable[[], Any]]]:
    return {
        "elementwise/add-fp32-2^20": lambda: elementwise("add"),
        "elementwise/relu-fp32-2^20": lambda: elementwise("relu"),
        "matmul/fp32-n512": matmul,
        **{f"inference/{m}-bs1-{g}": (lambda m=m, g=g: inference(m, g)) for m in ("mlp", "cnn") for g in GRAD_MODES},
        "attention/fp32-fwd-math-noncausal-s64-bs4-h4-d64": lambda: attention("math", False),
        "attention/fp32-fwd-math-causal-s64-bs4-h4-d64": lambda: attention("math", True),
        "attention/fp32-fwd-flash-noncausal-s64-bs4-h4-d64": lambda: attention("flash", False),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=0.5, help="timed seconds per case (default 0.5)")
    args = parser.parse_args()
    times = {}
    for case_id, build in cases().items():
        call = build()
        call()  # warm-up: a first call's allocations and kernel choices are not the case's time
        timer = benchmark.Timer(stmt="call()", globals={"call": call}, num_threads=torch.get_num_threads())
        times[case_id] = timer.blocked_autorange(min_run_time=args.seconds).median
    print(json.dumps(times))


if __name__ == "__main__":
    main()
