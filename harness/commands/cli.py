"""`gpubench`: the command line. Each subcommand is a module with the same two functions,
`setup_arguments(subparsers)` and `run_from_args(args, extra)`; this module only dispatches."""

from __future__ import annotations

import argparse
import sys
from types import ModuleType

from gpubench.harness.commands import ab_command, compare_command, env_command, fleet_command, report_command, run_command

COMMANDS: dict[str, ModuleType] = {"run": run_command, "env": env_command, "report": report_command,
                                   "ab": ab_command, "fleet": fleet_command, "compare": compare_command}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpubench", description="Synchronized PyTorch benchmarks and cross-machine reports.")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS.values():
        command.setup_arguments(sub)
    return parser


def tolerant_output() -> None:
    """A terminal whose encoding lacks a character gpubench prints (— ± × under a Latin-1 locale)
    gets a replacement, not a UnicodeEncodeError: compare's crash would exit 1, the 'slower' code."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="replace")


def main(argv: list[str] | None = None) -> int:
    tolerant_output()
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    command = COMMANDS[args.command]
    if extra and not command.PASSES_PYTEST_ARGS:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return command.run_from_args(args, extra)


if __name__ == "__main__":
    sys.exit(main())
