"""`gpubench`: the command line. Each subcommand is a module with the same two functions,
`setup_arguments(subparsers)` and `run_from_args(args, extra)`; this module only dispatches."""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from types import ModuleType
from typing import NoReturn

from gpubench.harness.core.pytest_args import option_names, without_separator
from gpubench.harness.commands import (
    ab_command,
    compare_command,
    env_command,
    fleet_command,
    report_command,
    run_command,
)
from gpubench.harness.core.exits import ExitCode, UsageError
from gpubench.harness.processes.standard_streams import guard_standard_streams
from gpubench.harness.core.console import CONSOLE, VOICE

COMMANDS: dict[str, ModuleType] = {
    "run": run_command,
    "env": env_command,
    "report": report_command,
    "ab": ab_command,
    "fleet": fleet_command,
    "compare": compare_command,
}
# run and ab document every problem with an option as refused before the first case (a misspelt one
# as much as a bad value, which their build processes refuse with 4); report, compare, env and fleet
# document a bad argument as 2.
USAGE_EXITS: dict[str, ExitCode] = {"run": ExitCode.REFUSED, "ab": ExitCode.REFUSED}
# The commands that speak in a voice of their own; the others' lines begin `gpubench:`.
OWN_VOICES: dict[str, str] = {"ab": "gpubench ab", "fleet": "gpubench fleet"}


class _OneLineParser(argparse.ArgumentParser):
    """argparse's usage errors said as gpubench's other refusals are: one line naming the fix, and
    the command's documented exit code, where argparse prints the whole usage block and exits 2
    whatever the command."""

    usage_exit: int = ExitCode.ERROR

    def error(self, message: str) -> NoReturn:
        fix = "" if " — " in message else f" — see {self.prog} --help"
        CONSOLE.error(f"{message}{fix}")
        raise SystemExit(int(self.usage_exit))


def subcommand_parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next(
        action for action in parser._actions if isinstance(action, argparse._SubParsersAction)
    ).choices


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(
        prog="gpubench", description="Synchronized PyTorch benchmarks and cross-machine reports."
    )
    # its parsers are OneLineParsers too
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS.values():
        command.setup_arguments(sub)
    for name, command_parser in subcommand_parsers(parser).items():
        command_parser.usage_exit = USAGE_EXITS.get(name, ExitCode.ERROR)
    return parser


def tolerant_output() -> None:
    """A character the terminal's encoding lacks (— ± × under Latin-1) is replaced: a
    UnicodeEncodeError would exit 1, compare's 'slower' code."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="replace")


# How close a word must be to be taken for a misspelling (difflib's ratio): --devcie is 0.88 from
# --device, while pytest-profiling's --profile-svg is 0.82 from --profile and goes to pytest; rnu is
# 0.67 from run.
OPTION_CUTOFF, COMMAND_CUTOFF = 0.85, 0.6


def misspelt(word: str, known: list[str], cutoff: float) -> str | None:
    """The known word `word` is a misspelling of, if it is one (and not that word itself)."""
    close = difflib.get_close_matches(word, known, n=1, cutoff=cutoff)
    return close[0] if close and close[0] != word else None


def command_typo(argv: list[str]) -> str | None:
    """`gpubench rnu`: one line naming the command meant, before argparse lists them all."""
    first = next((arg for arg in argv if not arg.startswith("-")), None)
    meant = (
        misspelt(first, list(COMMANDS), COMMAND_CUTOFF)
        if first is not None and first not in COMMANDS
        else None
    )
    return f"unknown command {first!r} — did you mean {meant!r}?" if meant else None


def long_flags(parser: argparse.ArgumentParser, command: str) -> list[str]:
    return [
        flag
        for action in subcommand_parsers(parser)[command]._actions
        for flag in action.option_strings
        if flag.startswith("--")
    ]


def option_typos(parser: argparse.ArgumentParser, command: str, extra: list[str]) -> str | None:
    """`gpubench run --devcie cpu`: said here, not by pytest after torch's import, as a usage
    error."""
    own = long_flags(parser, command)
    for flag in option_names(extra):
        meant = misspelt(flag, own, OPTION_CUTOFF) if flag not in own else None
        if meant:
            return (
                f"{flag} is not an option of gpubench {command} — did you mean {meant}? "
                "(options gpubench does not know go to pytest)"
            )
    return None


def unrecognized(parser: argparse.ArgumentParser, command: str, extra: list[str]) -> str:
    """`gpubench report --bseline x`: argparse's complaint, with the option meant where one is
    close."""
    said = f"unrecognized arguments: {' '.join(extra)}"
    own = long_flags(parser, command)
    for flag in option_names(extra):
        if close := misspelt(flag, own, COMMAND_CUTOFF):
            return f"{said} — did you mean {close}?"
    return said


# A value that reads as a negative number with a unit (-5s, -5%): argparse takes it for an option
# and answers "expected one argument"; joined to its option it reaches the option's own refusal.
NEGATIVE_VALUE = re.compile(r"-\.?\d")


def negative_values_joined(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """`--budget -5s` as `--budget=-5s`, for each option of the command that takes one value."""
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    if command not in COMMANDS:
        return argv
    takes_value = {
        flag
        for action in subcommand_parsers(parser)[command]._actions
        if action.nargs is None
        for flag in action.option_strings
    }
    joined: list[str] = []
    for arg in argv:
        if joined and joined[-1] in takes_value and NEGATIVE_VALUE.match(arg):
            joined[-1] = f"{joined[-1]}={arg}"
        else:
            joined.append(arg)
    return joined


def main(argv: list[str] | None = None) -> int:
    guard_standard_streams()
    tolerant_output()
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    if typo := command_typo(argv):
        parser.error(typo)
    argv = negative_values_joined(parser, argv)
    args, extra = parser.parse_known_args(argv)
    extra = without_separator(extra)
    command, command_parser = COMMANDS[args.command], subcommand_parsers(parser)[args.command]
    CONSOLE.speak_as(OWN_VOICES.get(args.command, VOICE))
    if extra and not command.PASSES_PYTEST_ARGS:
        command_parser.error(unrecognized(parser, args.command, extra))
    if typo := option_typos(parser, args.command, extra):
        command_parser.error(typo)
    # every refusal ends here: its one line, and the command's documented exit status
    try:
        check_working_folder()
        return command.run_from_args(args, extra)
    except UsageError as error:
        CONSOLE.error(str(error))
        return int(USAGE_EXITS.get(args.command, ExitCode.ERROR))


def check_working_folder() -> None:
    """A working folder removed under the shell: pytest, the builds and every relative path would
    fail on it later, as a traceback."""
    try:
        os.getcwd()
    except OSError as error:
        raise UsageError(
            f"the working folder is gone ({error.strerror}) — cd into a folder that exists, then "
            "run again"
        ) from None


if __name__ == "__main__":
    sys.exit(main())
