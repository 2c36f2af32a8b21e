"""The example report folded, never cut: regenerated from the committed example CSVs it fits 250
lines with the answer at the top, and every figure and case name it held at 321 lines is still there
to find."""

from __future__ import annotations

import pytest

# These tests read the report's text, not its pixels (conftest.unrendered_plots).
pytestmark = pytest.mark.usefixtures("unrendered_plots")

MAX_LINES = 250
ANSWER_LINE = 2

# What the 321-line report said, section by section: figures as it printed them and the cases it
# named. Folding a table into cells or a sentence keeps each one; dropping a row or a column loses
# one of them.
KEY_TEXTS = {
    "answer": [
        "11.6x (95% 10.9–12.3, geomean of 19 cases, 19 built once)",
        "877 ms, accuracy 0.859",
    ],
    "summary": [
        "0.191 TFLOP/s (95% 0.174–0.209)",
        "778 TFLOP/s (79% of peak) (95% 665–910)",
        "34.2 GB/s (95% 30.5–38.4)",
        "4343 GB/s (95% 3712–5080)",
        "41.4 GB/s (95% 35.4–48.4)",
        "0.57 efficiency at 2 processes (2449 samples/s, gloo)",
        "29.9 s (95% 25.6–35 s), accuracy 0.860",
        "9.95 s (95% 8.51–11.6 s) `preloaded-bf16-cl` (0.855)",
        "11.3 s (seeds 9.5–12.6 s) `fastest-epoch`, template 34.7 s (3.06x)",
        "no RAPL energy counters",
        "2 · 2.14.1+cu130",
        "60 · 29",
    ],
    "health": [
        "38.1 vs 50.79: 0.75 (≥10% below)",
        "0.98 of published 794.5",
        "54.95 vs 54.95: 1.00 (ok)",
        "SM clock median 1980 MHz over 81 rows",
        "No reference for AMD EPYC",
    ],
    "before and after": [
        "time_to_accuracy/template",
        "28.2 s",
        "38 s",
        "only in `cpu-2core-quick` (35)",
        "time_to_accuracy/fastest-epoch",
        "BASE quick; NEW full",
    ],
    "matmul": [
        "583 TFLOP/s",
        "0.00282 TFLOP/s",
        "0.412 TFLOP/s",
        "989 TFLOP/s",
        "66.9 TFLOP/s",
        "495 TFLOP/s",
        "78.6",
        "50.9",
        "4.4%",
        "2.7%",
        "4.1%",
    ],
    "gpu over cpu": ["36.6", "5.43 ms", "199 ms"],
    "transfer": [
        "54.9 GB/s (95% 47–64.3) `transfer/d2h-256MiB-pinned-blocking`",
        "55.1 GB/s (95% 47.1–64.5) `transfer/h2d-256MiB-pinned-nb`",
    ],
    "elementwise": ["172 GB/s (95% 150–198)", "relu-fp32-2^20", "add-fp32-2^28", "add-fp32-2^25"],
    "self-check": ["208 µs", "10.8 ms", "2.71 ms", "1.01"],
    "speedups": [
        "294x (95% 261–332; 4 cases, 146–1.2e+03)",
        "393x (95% 348–442; 4 cases, 195–1.6e+03)",
        "0.957x (95% 0.832–1.1; 6 cases, 0.438–1.75)",
        "17.1x (95% 15.6–18.7; 5 cases, 8.64–33.4)",
    ],
    "epoch": [
        "3.95",
        "preloaded-bf16-cl-bs1024 (0.824)",
        "preloaded-bf16-cl-compile-default-bs1024 (0.830)",
        "259 ms, accuracy 82.4%, data wait 3.0%",
        "9.95 s windows ±13%, accuracy 85.5%, data wait 0.74%",
        "6.93 s, accuracy 86.2%, data wait 81.7%",
    ],
    "compile": ["12.5 s", "3.93 ms", "3.51 ms", "10.7", "29713"],
    "time to accuracy": [
        "fastest-epoch",
        "speedrun",
        "11.4",
        "43.7",
        "0.877 epochs",
        "85.7%",
        "85.0%",
        "3.06",
    ],
    "memory strategies": [
        "step 90.6 ms ±8%, peak 82.8 MiB (cpu-profiler), 2.84 k samples/s",
        "step 2.1 ms, peak 124 MiB (cuda-allocator), 122 k samples/s",
        "smaller_batch",
    ],
    "inference": [
        "17.2 k samples/s ±48% (noisy)",
        "368 k samples/s ±14% (noisy)",
        "9.49 M samples/s",
        "1.59 M samples/s",
        "3.11 k samples/s ±2% (noisy;short-rounds)",
        "3.81 k samples/s ±13%",
        "8.45 k samples/s",
        "666 k samples/s",
    ],
    "multi-process": [
        "2.45 k samples/s",
        "1.22 k samples/s",
        "98.2 ms",
        "57.1%",
        "30.9 k samples/s",
        "3.77 ms",
    ],
    "profiler": [
        "aten::convolution_backward",
        "Optimizer.step\\#Adam.step",
        "3.12",
        "1.45",
        "0.841",
    ],
    "recommendations": [
        "pinned memory peaks at 54.9 GB/s against 15.0 pageable",
        "`no_grad` at mlp bs256",
        "2 setting(s) wait for their data loader",
    ],
    "flagged": [
        "cnn-bs1-grad",
        "ddp-x2-gloo-bs128",
        "fp32-n2048",
        "accumulation-acc4-bs64",
        "short-rounds",
        "one-sample",
    ],
    "rows not ok": [
        "DataParallel needs two or more GPUs (this machine has 0)",
        "d2h-1MiB-pageable-blocking",
        "tf32-n2048",
        "the CPU-vs-GPU speedup needs an accelerator",
    ],
    "machines": [
        "85ddd6f6788f",
        "eeaff5b5e503",
        "6d6deb0eaa28",
        "Intel(R) Xeon(R) Processor",
        "23.5 GiB",
        "32 MiB",
        "140 GiB",
        "Linux 6.18.44-fc-v669",
        "3.11.7",
        "91900",
        "580.159.04",
        "b5d0d0fc673a",
        "cuda_version 13.0",
        "gpubench_version 0.1.0",
    ],
}


def test_the_example_report_fits_250_lines_with_the_answer_at_the_top(example_report: str) -> None:
    lines = example_report.splitlines()
    assert len(lines) <= MAX_LINES, f"{len(lines)} lines"
    assert lines[ANSWER_LINE].startswith("**Answer:** ")


@pytest.mark.parametrize("part", sorted(KEY_TEXTS))
def test_folding_the_example_report_keeps_every_figure(example_report: str, part: str) -> None:
    missing = [text for text in KEY_TEXTS[part] if text not in example_report]
    assert not missing, f"{part}: {missing}"
