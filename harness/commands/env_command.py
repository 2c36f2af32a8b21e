"""`gpubench env`: this machine's fingerprint, as aligned lines or JSON."""

from __future__ import annotations

import argparse

from gpubench.harness.core.exits import ExitCode
from gpubench.harness.core.console import CONSOLE

PASSES_PYTEST_ARGS = False


def setup_arguments(sub: argparse._SubParsersAction) -> None:
    env = sub.add_parser("env", help="print this machine's fingerprint")
    env.add_argument("--device", default="auto")
    env.add_argument("--json", action="store_true", help="print JSON instead of aligned lines")
    env.add_argument(
        "--peaks",
        action="store_true",
        help="print the datasheet peaks gpubench knows (dense TFLOP/s per dtype, memory GB/s)",
    )


def run_from_args(args: argparse.Namespace, extra: list[str]) -> int:
    import json

    # what a report's "% of peak" divides by, per device
    if args.peaks:
        from gpubench.reports.render.markdown import md_table
        from gpubench.reports.judge.tables import peaks_table

        CONSOLE.show(md_table(peaks_table()))
        return ExitCode.OK

    from gpubench.harness.devices.device import resolve_device
    from gpubench.harness.devices.env import fingerprint, format_fingerprint, gpu_telemetry

    device = resolve_device(args.device)
    from gpubench.harness.devices.energy import energy_counter

    fields = fingerprint(device)
    if device.type == "cuda":
        fields.update(gpu_telemetry(device.index or 0))
    # what the run's energy columns will come from
    counter, note = energy_counter(device)
    fields["energy_source"] = counter.source if counter is not None else note
    CONSOLE.show(
        json.dumps(fields, indent=2, default=str) if args.json else format_fingerprint(fields)
    )
    return ExitCode.OK
