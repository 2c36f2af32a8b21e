"""Every command the documentation shows in a fenced shell block runs as written, or is exempt here
with the reason.

The pages are README.md and docs/*.md but architecture.md (a map of the code; docs/validation/ keeps
the evidence, each command with its own machine and date). Each command runs once, in the order of
its block, in a folder that makes sense for it: a view of this checkout (its code linked,
reports/examples copied, results/ made there), or, for a block that names `test_model.py`, a user's
own folder holding the test file docs/usage.md shows. A command a page gains is run by this test
from then on: one this CPU-only, offline machine cannot run goes in EXEMPT, with why."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from gpubench.harness.core.duration_text import parse_budget
from gpubench.harness.core.exits import ExitCode, UsageError

ROOT = Path(__file__).resolve().parent.parent
PAGES = [
    ROOT / "README.md",
    *sorted(page for page in (ROOT / "docs").glob("*.md") if page.name != "architecture.md"),
]
SHELLS = frozenset({"bash", "sh", "shell", "console", "zsh"})
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)\n(?P<body>.*?)^(?P=indent)```", re.M | re.S)
# A line of an untagged block that starts so is a command someone forgot to tag: it would be neither
# run nor exempt.
PROGRAMS = re.compile(
    r"^(\$ )?(gpubench|pytest|python3?|pip|make|torchrun|scripts/|sudo|\.venv/)( |$)"
)
# the file name the docs give a user's own test of the `gpubench` fixture
USER_TEST = "test_model.py"

# Commands a CPU-only, offline, 2-core machine cannot run (or must not: they install or change the
# machine), each with what runs it instead. Keyed by the command as the page writes it, its comment
# left out.
CI = "CI runs it (.ci/run), and this test runs under it"
SECOND_TORCH = (
    "needs a second torch installed under /opt; tests/test_ab*.py run sessions of two interpreters"
)
TEAM = (
    "changes the machine's groups and a shared folder (root); tests/test_shared_store.py checks "
    "the modes"
)
EXEMPT: dict[str, str] = {
    "make bench": "the main job (minutes, and it makes .venv): the developers try it from a fresh "
    "clone",
    "make test": CI,
    "pip wheel --no-deps -w dist .": "builds a wheel (pip's build isolation needs the network); "
    "scripts/wheel-smoke, run by CI, builds and installs one",
    "pip install -c constraints.txt dist/gpubench-*.whl": "installs into the venv the tests run "
    "in; scripts/wheel-smoke installs the wheel into a fresh one",
    'gpubench fleet --cluster slurm --store /shared/store --profile quick -m "not slow" '
    "--target partition=h100,gres=gpu:1,time=60 --target "
    "partition=a100,gres=gpu:1,time=60,name=a100 "
    "--target constraint=l40s,gres=gpu:1,time=1:30:00 --target "
    "nodelist=node17,gres=gpu:8,device=cuda:3,"
    "name=node17-gpu3": "Slurm partitions of GPUs; tests/test_fleet.py's slurm tests run a fleet "
    "on a one-node cluster",
    'gpubench ab --a-python /opt/torch213/bin/python -k "matmul or conv2d"': SECOND_TORCH,
    "gpubench run --model torchvision.models:resnet18 --input 3x224x224 --device cuda": (
        "CUDA (a CPU takes minutes for the quick profile's cold torch.compile of it); the smoke "
        "line above runs"
    ),
    "gpubench run --model mypackage.nets:build_net --input 128 --device cuda --budget 5m": (
        "CUDA, and a package of the reader's own"
    ),
    "gpubench run --model model:gpt_small --input 256 --input-ids 50304": (
        "a module of the reader's own (model.py); tests/test_model.py runs token-id models"
    ),
    "scripts/gpu-check OUT [--fashion-dir DIR]": "CUDA (and DIR stands for a folder)",
    "scripts/gpu-check --dry-run OUT": "minutes of steps; tests/test_gpu_check.py runs the dry "
    "run with every step made tiny",
    "torchrun --nproc_per_node=8 -m gpubench.harness.workloads.ddp_worker --results-dir results": (
        "8 GPUs; the CPU line below it runs here, and tests/test_ddp.py runs the worker under "
        "torchrun"
    ),
    "torchrun --nnodes=2 --node_rank=0 --nproc_per_node=8 --rdzv_backend=c10d "
    "--rdzv_endpoint=HOST0:29500 -m gpubench.harness.workloads.ddp_worker --results-dir results": (
        "a second node at HOST0; tests/test_ddp.py runs this recipe with both nodes on this host"
    ),
    "torchrun --nnodes=2 --node_rank=0 --nproc_per_node=8 --rdzv_backend=c10d "
    "--rdzv_endpoint=HOST0:29500 -m gpubench.harness.workloads.collectives_worker --results-dir "
    "results": "a second node at HOST0; tests/test_collectives.py runs the worker",
    "sudo groupadd benchteam; sudo usermod -aG benchteam alice": TEAM,
    "mkdir /shared/store && chgrp benchteam /shared/store": TEAM,
    "chmod 3770 /shared/store": TEAM,
    "umask 0007": TEAM,
}
# compare and ab end in a verdict, and which one depends on this machine's noise at the moment: any
# verdict is the command working as documented; 2 and 4 (a usage error, a refused side) are not.
VERDICTS = frozenset({ExitCode.OK, ExitCode.FAILED, ExitCode.CANNOT_JUDGE})
# the documented budgets are 30 s to a minute; a report and a fork server come on top
COMMAND_TIMEOUT_S = 420
# A documented --budget (30 s, a minute) is what a reader spends; here it is the test's time, and
# what the test checks is that the command runs as written, not how long it measures. So a command
# runs with RUN_BUDGET instead, once its own budget has been read as gpubench reads it (a budget a
# page spells wrong still fails here). Ten seconds: a run's first case starts 3-4 s in on a busy
# 2-core machine, and an ab session gets its first pair.
RUN_BUDGET = "10s"
BUDGET = re.compile(r"(--budget[= ])(\S+)")


@dataclass(frozen=True)
class Command:
    # relative to the checkout
    page: str
    # where the command starts on its page
    line: int
    # the line its block starts on: commands of one block run in order, in one folder
    block: int
    # as written, continuation lines joined
    text: str

    @property
    def key(self) -> str:
        return " ".join(without_comment(self.text).split())

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.key}"


def without_comment(text: str) -> str:
    """The command before its `#` comment: a `#` that starts a word outside quotes, as the shell
    reads it."""
    quote = ""
    for at, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (at == 0 or text[at - 1].isspace()):
            return text[:at].rstrip()
    return text.rstrip()


def commands_of(lang: str, body: str) -> list[tuple[int, str]]:
    """(line within the block, command) for each command of a shell block: `\\` continuations
    joined, lines that are only a comment left out; in a console block only the `$ ` lines (the rest
    is output)."""
    found: list[tuple[int, str]] = []
    lines = body.splitlines()
    index = 0
    while index < len(lines):
        start, text = index, lines[index]
        index += 1
        if lang == "console":
            if not text.startswith("$ "):
                continue
            text = text[2:]
        while text.rstrip().endswith("\\") and index < len(lines):
            text = text.rstrip()[:-1].rstrip() + " " + lines[index].strip()
            index += 1
        if without_comment(text).strip():
            found.append((start, text.strip()))
    return found


def fenced(page: Path) -> list[tuple[int, str, str]]:
    """(first line of the body, language, body with the fence's indent removed) for each fenced
    block of a page."""
    text = page.read_text(encoding="utf-8")
    blocks = []
    for match in FENCE.finditer(text):
        indent = len(match["indent"])
        body = "\n".join(line[indent:] for line in match["body"].splitlines())
        blocks.append((text.count("\n", 0, match.start("body")) + 1, match["lang"], body))
    return blocks


def documented_commands(pages: list[Path] = PAGES, root: Path = ROOT) -> list[Command]:
    return [
        Command(str(page.relative_to(root)), first + offset, first, text)
        for page in pages
        for first, lang, body in fenced(page)
        if lang in SHELLS
        for offset, text in commands_of(lang, body)
    ]


COMMANDS = documented_commands()
RUN = [command for command in COMMANDS if command.key not in EXEMPT]


def user_test_file() -> str:
    """docs/usage.md's whole test file for the `gpubench` fixture: the python block that imports
    torch and defines test_train_step (the README shows one function of it and points there)."""
    blocks = [
        body
        for _, lang, body in fenced(ROOT / "docs" / "usage.md")
        if lang == "python" and "def test_train_step(gpubench)" in body and "import torch" in body
    ]
    assert len(blocks) == 1, f"docs/usage.md should show one whole {USER_TEST}, found {len(blocks)}"
    return blocks[0] + "\n"


# ----------------------------------------------------------------------------------------------
# what the docs show


def test_commands_are_split_as_the_shell_reads_them(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        'Text.\n\n```bash\n# a comment line\ngpubench run -k "a # b" \\\n    --budget 30s   # '
        "why\n\n"
        "make test\n```\n\n- item:\n\n  ```sh\n  torchrun x   # indented\n  ```\n\n"
        "```console\n$ gpubench env\ndevice cpu\n```\n\n```\ngpubench: a line of output\n```\n\n"
        "```python\nprint('not shell')\n```\n",
        encoding="utf-8",
    )
    found = [
        (command.line, command.block, command.key)
        for command in documented_commands([page], tmp_path)
    ]
    assert found == [
        (5, 4, 'gpubench run -k "a # b" --budget 30s'),
        (8, 4, "make test"),
        (14, 14, "torchrun x"),
        (18, 18, "gpubench env"),
    ]


def test_no_untagged_block_holds_a_command() -> None:
    """An untagged block is never run: a command in one would be neither run nor exempt. Tag it
    bash."""
    untagged = [
        f"{page.relative_to(ROOT)}:{first + offset}: {line}"
        for page in PAGES
        for first, lang, body in fenced(page)
        if not lang
        for offset, line in enumerate(body.splitlines())
        if PROGRAMS.match(line)
    ]
    assert untagged == []


def test_every_exemption_is_a_command_a_page_shows() -> None:
    assert sorted(set(EXEMPT) - {command.key for command in COMMANDS}) == []


def test_a_documented_budget_runs_shorter_once_gpubench_has_read_it() -> None:
    assert with_run_budget("gpubench run -k matmul --budget 30s   # within 30 s") == (
        "gpubench run -k matmul --budget 10s   # within 30 s"
    )
    assert with_run_budget("gpubench ab --budget=1m -k x") == "gpubench ab --budget=10s -k x"
    assert with_run_budget("gpubench run --budget 6s --budget none") == (
        "gpubench run --budget 6s --budget 10s"
    )
    with pytest.raises(UsageError, match="use a duration such as 90s"):
        with_run_budget("gpubench run --budget 30")


def test_the_pages_show_commands_to_run_and_the_users_test_file() -> None:
    """A fence the pattern stopped matching would leave nothing to run, and every test here
    passing."""
    assert len(RUN) >= 15 and any(USER_TEST in command.text for command in RUN)
    compile(user_test_file(), USER_TEST, "exec")


# ----------------------------------------------------------------------------------------------
# running them


@dataclass
class Outcome:
    code: int
    output: str


@dataclass
class Place:
    folder: Path
    env: dict[str, str]


_places: dict[tuple[str, int], Place] = {}
# per worker process: a block's earlier commands run once
_outcomes: dict[Command, Outcome] = {}


def place_for(command: Command, temporary: pytest.TempPathFactory) -> Place:
    """The folder a block's commands run in, made at the block's first command. HOME is a fresh
    folder beside it, so what a command keeps under ~/.cache (fleet's job files, a data root) stays
    out of this user's."""
    key = (command.page, command.block)
    if key not in _places:
        block = [other for other in COMMANDS if (other.page, other.block) == key]
        base = temporary.mktemp("docs")
        folder, home = base / "here", base / "home"
        folder.mkdir()
        home.mkdir()
        if any(USER_TEST in other.text for other in block):
            (folder / USER_TEST).write_text(user_test_file(), encoding="utf-8")
        else:
            checkout_view(folder)
        env = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}
        # offline: no MNIST download attempt
        env.update(
            HOME=str(home),
            GPUBENCH_DOWNLOAD="0",
            PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
        )
        _places[key] = Place(folder, env)
    return _places[key]


def checkout_view(folder: Path) -> None:
    """This checkout as the commands see it from its root: code, scripts and configuration linked;
    reports/examples copied, so a command that writes beside the examples writes in the copy."""
    for name in (
        "benches",
        "gpubench",
        "harness",
        "scripts",
        "tests",
        "conftest.py",
        "pyproject.toml",
        "Makefile",
        "constraints.txt",
        "constraints-floor.txt",
    ):
        (folder / name).symlink_to(ROOT / name)
    shutil.copytree(ROOT / "reports" / "examples", folder / "reports" / "examples")


def with_run_budget(text: str) -> str:
    """The command with each --budget longer than RUN_BUDGET made RUN_BUDGET; a budget gpubench
    refuses raises its UsageError."""

    def shorter(match: re.Match[str]) -> str:
        written = parse_budget(match[2].strip("'\""))
        if written is None or written > parse_budget(RUN_BUDGET):
            return match[1] + RUN_BUDGET
        return match[0]

    return BUDGET.sub(shorter, text)


def run_as_written(command: Command, place: Place) -> Outcome:
    """The command through bash, as a reader pastes it (its budget at most RUN_BUDGET); its whole
    process group is killed if it overruns."""
    proc = subprocess.Popen(
        ["bash", "-c", with_run_budget(command.text)],
        cwd=place.folder,
        env=place.env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=COMMAND_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        return Outcome(-signal.SIGKILL, f"killed after {COMMAND_TIMEOUT_S} s\n{output}")
    return Outcome(proc.returncode, output)


def outcome_of(command: Command, temporary: pytest.TempPathFactory) -> tuple[Outcome, list[str]]:
    """The command's outcome, after the commands before it in its block (what they leave, it may
    read)."""
    place = place_for(command, temporary)
    before = [
        other
        for other in RUN
        if (other.page, other.block) == (command.page, command.block) and other.line < command.line
    ]
    for other in [*before, command]:
        if other not in _outcomes:
            _outcomes[other] = run_as_written(other, place)
    return _outcomes[command], [f"{other.key} -> exit {_outcomes[other].code}" for other in before]


def expected_exits(command: Command) -> frozenset[int]:
    return (
        VERDICTS
        if command.key.startswith(("gpubench compare ", "gpubench ab "))
        else frozenset({ExitCode.OK})
    )


@pytest.mark.process
@pytest.mark.parametrize("command", RUN, ids=str)
def test_a_documented_command_runs_as_written(
    command: Command, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outcome, before = outcome_of(command, tmp_path_factory)
    assert outcome.code in expected_exits(command), (
        f"{command} exited {outcome.code} (documented: {sorted(expected_exits(command))}); before "
        f"it in its block: {before or 'nothing'}\n{outcome.output[-4000:]}"
    )


@pytest.mark.process
def test_the_documented_builds_option_gives_that_many_fresh_builds(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """docs/usage.md's `--gpubench-builds=5` makes five builds of its test that builds a fresh model
    each time."""
    (command,) = [c for c in RUN if "--gpubench-builds=5" in c.text]
    outcome, _ = outcome_of(command, tmp_path_factory)
    assert outcome.code == ExitCode.OK, outcome.output[-2000:]
    after = place_for(command, tmp_path_factory).folder / "after"
    rows = pd.concat(pd.read_csv(path) for path in after.glob("*.csv"))
    fresh = rows[rows["case_id"].str.startswith("mymodel/fresh") & (rows["status"] == "ok")]
    assert sorted(fresh["build"]) == [0, 1, 2, 3, 4]
