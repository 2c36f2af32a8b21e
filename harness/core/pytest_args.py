"""The user's pytest arguments, read in one place.

gpubench passes them to pytest untouched. What it must know of them before pytest parses them
(verbosity, output files, the selection, what a build cannot honour) is read here, token by token as
pytest reads them. Inside a build, pytest's own parser reads them and the plugin asks its config.
Torch-free.
"""

from __future__ import annotations

from pathlib import Path

JSON_OPTION = "--benchmark-json"
# Options after which pytest-benchmark writes into its storage folder.
SAVE_OPTIONS = (
    "--benchmark-save",
    "--benchmark-autosave",
    "--benchmark-compare",
    "--benchmark-storage",
)
OWN_PREFIX = "--gpubench-"
SELECTION_FLAGS = ("-k", "-m")


def without_separator(args: list[str]) -> list[str]:
    """`gpubench run -- -k x`: what follows `--` is pytest's, and pytest would read -k as a file."""
    if "--" not in args:
        return args
    kept = list(args)
    kept.remove("--")
    return kept


def option_value(args: list[str], option: str) -> str | None:
    """The last value given to a long option, as `--option V` or `--option=V`."""
    value = None
    for arg, following in zip(args, [*args[1:], None]):
        if arg == option:
            value = following
        elif arg.startswith(f"{option}="):
            value = arg.partition("=")[2]
    return value


def option_names(args: list[str]) -> list[str]:
    """Each long option's name, without its `=value`."""
    return [arg.partition("=")[0] for arg in args if arg.startswith("--")]


def asks_verbose(args: list[str]) -> bool:
    """-v, -vv or --verbose: pytest's own lines and pytest-benchmark's whole table."""
    return any(
        arg == "--verbose" or (arg.startswith("-v") and set(arg[1:]) == {"v"}) for arg in args
    )


def saves_benchmarks(args: list[str]) -> bool:
    return any(arg.startswith(SAVE_OPTIONS) for arg in args)


def tagged_json(path: Path, tag: str) -> Path:
    return path.with_name(f"{path.with_suffix('').name}.{tag}.json")


def with_tagged_json(args: list[str], tag: str) -> list[str]:
    """--benchmark-json X.json as X.<tag>.json, before pytest parses it: pytest-benchmark before 5.3
    opens the file while parsing, so a later build given the same name would empty the first build's
    file."""
    if not tag:
        return list(args)
    rewritten: list[str] = []
    for arg in args:
        if rewritten and rewritten[-1] == JSON_OPTION:
            arg = str(tagged_json(Path(arg), tag))
        elif arg.startswith(f"{JSON_OPTION}="):
            arg = f"{JSON_OPTION}={tagged_json(Path(arg.partition('=')[2]), tag)}"
        rewritten.append(arg)
    return rewritten


def own_options(args: list[str]) -> list[str]:
    """gpubench's options in pytest's form (--gpubench-budget): a run sets them in each build's
    plan."""
    return [name for name in option_names(args) if name.startswith(OWN_PREFIX)]


def first_of(args: list[str], flags: tuple[str, ...]) -> str | None:
    """The first argument that is one of `flags` (-n4 and -cFILE as well as -n 4, --lf=x as
    --lf)."""
    for arg in args:
        joined_short = arg[:2] in ("-n", "-c") and len(arg) > 2 and arg[:2] in flags
        if arg.partition("=")[0] in flags or joined_short:
            return arg
    return None


def plugins_disabled(args: list[str]) -> list[str]:
    """The plugins `-p no:NAME` turns off."""
    return [
        name[3:]
        for flag, name in zip(args, [*args[1:], ""])
        if flag == "-p" and name.startswith("no:")
    ]


def named_test_file(args: list[str]) -> str | None:
    """The first test file or node id given (`bench_x.py`, `bench_x.py::test[case]`)."""
    return next(
        (arg for arg in args if not arg.startswith("-") and arg.partition("::")[0].endswith(".py")),
        None,
    )


def selections(args: list[str]) -> list[tuple[str, str]]:
    """Each -k or -m with its expression (`-k x`, `-kx`)."""
    pairs = zip(args, [*args[1:], ""])
    return [
        (flag[:2], flag[2:] or following)
        for flag, following in pairs
        if flag[:2] in SELECTION_FLAGS and not flag.startswith("--")
    ]
