"""`gpubench`: the command line. Each subcommand is a module with the same two functions,
`setup_arguments(subparsers)` and `run_from_args(args, extra)`; this module only dispatches."""

from __future__ import annotations

import argparse
import difflib
import sys
from types import ModuleType

from gpubench.harness.commands import (
    ab_command, compare_command, env_command, fleet_command, report_command, run_command,
)
from gpubench.harness.processes.standard_streams import guard_standard_streams

COMMANDS: dict[str, ModuleType] = {"run": run_command, "env": env_command, "report": report_command,
                                   "ab": ab_command, "fleet": fleet_command, "compare": compare_command}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpubench",
                                     description="Synchronized PyTorch benchmarks and cross-machine reports.")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS.values():
        command.setup_arguments(sub)
    return parser


def tolerant_output() -> None:
    """A character the terminal's encoding lacks (— ± × under Latin-1) is replaced: a UnicodeEncodeError
    would exit 1, compare's 'slower' code."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="replace")


# How close a word must be to be taken for a misspelling (difflib's ratio): --devcie is 0.88 from --device, while
# pytest-profiling's --profile-svg is 0.82 from --profile and goes to pytest; rnu is 0.67 from run.
OPTION_CUTOFF, COMMAND_CUTOFF = 0.85, 0.6


def misspelt(word: str, known: list[str], cutoff: float) -> str | None:
    """The known word `word` is a misspelling of, if it is one (and not that word itself)."""
    close = difflib.get_close_matches(word, known, n=1, cutoff=cutoff)
    return close[0] if close and close[0] != word else None


def command_typo(argv: list[str]) -> str | None:
    """`gpubench rnu`: one line naming the command meant, before argparse lists them all."""
    first = next((arg for arg in argv if not arg.startswith("-")), None)
    meant = misspelt(first, list(COMMANDS), COMMAND_CUTOFF) if first is not None and first not in COMMANDS else None
    return f"unknown command {first!r} — did you mean {meant!r}?" if meant else None


def option_typos(parser: argparse.ArgumentParser, command: str, extra: list[str]) -> str | None:
    """`gpubench run --devcie cpu`: said here, not by pytest after torch's import, as a usage error."""
    sub = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction)).choices[command]
    own = [flag for action in sub._actions for flag in action.option_strings if flag.startswith("--")]
    for arg in extra:
        flag = arg.split("=", 1)[0]
        meant = misspelt(flag, own, OPTION_CUTOFF) if flag.startswith("--") and flag not in own else None
        if meant:
            return (f"{flag} is not an option of gpubench {command} — did you mean {meant}? "
                    "(options gpubench does not know go to pytest)")
    return None


def main(argv: list[str] | None = None) -> int:
    guard_standard_streams()
    tolerant_output()
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    if typo := command_typo(argv):
        parser.error(typo)
    args, extra = parser.parse_known_args(argv)
    if "--" in extra:  # `gpubench run -- -k x`: what follows is pytest's, and pytest would read -k as a file
        extra.remove("--")
    command = COMMANDS[args.command]
    if extra and not command.PASSES_PYTEST_ARGS:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if typo := option_typos(parser, args.command, extra):
        parser.error(typo)
    return command.run_from_args(args, extra)


if __name__ == "__main__":
    sys.exit(main())
