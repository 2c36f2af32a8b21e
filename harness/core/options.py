"""gpubench's run options: declared once for both the pytest plugin and the commands' parsers, read
once into a typed `RunOptions` that every build receives as it is. Torch-free: the CLI imports it
before deciding whether to load torch."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any

from gpubench.harness.core.exits import UsageError
from gpubench.harness.core.model_spec import ModelSpec, parse_model_options
from gpubench.harness.core.plan import MAX_BUILD_CALLS
from gpubench.harness.core.duration_text import parse_budget, parse_duration


@dataclass(frozen=True)
class Option:
    flag: str
    default: Any
    help: str
    # None: an on/off switch
    type: Callable[[str], Any] | None = str

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def namespaced(self) -> str:
        """The pytest form that cannot collide with another plugin's option
        (`--gpubench-profile`)."""
        return "--gpubench-" + self.flag.lstrip("-")

    @property
    def pytest_dest(self) -> str:
        """pytest's dest, namespaced too: argparse refuses two options sharing a dest
        (pytest-profiling's `profile`)."""
        return "gpubench_" + self.dest

    def kwargs(self, dest: str | None = None) -> dict[str, Any]:
        dest = dest or self.dest
        if self.type is None:
            return {"action": "store_true", "default": False, "help": self.help, "dest": dest}
        return {"default": self.default, "type": self.type, "help": self.help, "dest": dest}


RESULTS_DIR_DEFAULT = "results"

RUN_OPTIONS: tuple[Option, ...] = (
    Option(
        "--device",
        "auto",
        "device to benchmark: auto (cuda > mps > cpu), cpu, cuda, cuda:N, mps; cuda:all "
        "(gpubench run only): the micro cases on each GPU in turn, one run each, one report",
    ),
    Option(
        "--profile",
        "quick",
        "quick (default; minutes on a 2-core CPU), full (every size and setting), "
        "smoke (tiny; tests the suite itself, figures meaningless)",
    ),
    Option(
        "--results-dir",
        RESULTS_DIR_DEFAULT,
        "folder for the run's CSV and sidecars (default: results/)",
    ),
    Option(
        "--store",
        None,
        "results store: write into STORE/<machine>/ (host name + hardware hash, "
        "resolved on the machine that runs) instead of --results-dir",
    ),
    Option("--run-id", None, "name of this run's files (default: UTC time, host, pid)"),
    Option(
        "--data-root", None, "where MNIST / Fashion-MNIST live (default: ~/.cache/gpubench/data)"
    ),
    Option(
        "--dataset",
        "auto",
        "training data: auto, mnist, fashion-mnist, synthetic "
        "(default auto: mnist > fashion-mnist > synthetic)",
    ),
    Option(
        "--nproc",
        None,
        "processes for the distributed (DDP) cases (default: the GPU count on cuda, 2 on cpu)",
        int,
    ),
    Option(
        "--target-accuracy",
        None,
        "test accuracy the time_to_accuracy cases train to, in (0, 1) "
        "(default: 0.98 on MNIST, 0.85 on Fashion-MNIST)",
        float,
    ),
    Option(
        "--builds",
        None,
        "independent builds of every case, each in its own process under gpubench run "
        "(default: the profile's, per workload)",
        int,
    ),
    Option(
        "--build-seconds",
        None,
        "timed seconds per build of a micro-benchmark case "
        "(default: the profile's: smoke 0.05, quick 0.1, full 0.3)",
        float,
    ),
    Option(
        "--threads",
        None,
        "torch threads of each build process (default: torch's, one per core); fewer than the "
        "free cores keeps builds from waiting on a busy core",
        int,
    ),
    Option(
        "--wait-quiet",
        None,
        "before the first case, wait up to this long (90s, 10m) for other processes to "
        "leave the CPU and GPU; then measure anyway, flagged busy (default: measure at once)",
    ),
    Option(
        "--build-calls",
        None,
        "timed calls per build of a micro-benchmark case, at least "
        "(default: the profile's rounds decide)",
        int,
    ),
    Option(
        "--budget",
        None,
        "time for the whole run, all builds (90s, 4m, 1h, or none): each case gets a share of "
        "what is left and is capped (fewer rounds) or skipped when one call does not fit it "
        "(default: the profile's: quick 5m; smoke and full none)",
    ),
    Option(
        "--model",
        None,
        "benchmark your own model instead of the suite: a factory of an nn.Module as "
        "module:function (e.g. torchvision.models:resnet18), its training step and inference over "
        "the suite's settings; needs --input",
    ),
    Option(
        "--input",
        None,
        "with --model: the shape of one sample, sizes joined by 'x' without the batch size "
        "(e.g. 3x64x64)",
    ),
    Option(
        "--input-ids",
        None,
        "with --model and --input: the sample is integer token ids (int64) below this "
        "vocabulary size, as a language model takes (e.g. --input 256 --input-ids 50304)",
    ),
    Option(
        "--profile-ops",
        False,
        "also run a few steps of each training case under torch.profiler and store the top 15 ops",
        None,
    ),
)


def add_to_parser(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, leave_out: tuple[str, ...] = ()
) -> None:
    """The run options on a subcommand's parser, less the flags in `leave_out` (which it defines
    itself)."""
    for option in RUN_OPTIONS:
        if option.flag not in leave_out:
            parser.add_argument(option.flag, **option.kwargs())


# builds of one case: a larger --builds (or build index) is a typo, not a plan
MAX_BUILDS = 100
MAX_BUILD_SECONDS = 60.0


@dataclass(frozen=True)
class RunOptions:
    """The run options as typed values, made once where the user's words enter (`gpubench
    run`/`ab`/`fleet`'s arguments, or pytest's for a plain `pytest benches`) and carried to every
    build as this value (JSON in its plan): nothing downstream parses an option again. What only the
    machine that runs can check (the device exists, the cores for --threads, the data files) is
    checked there, against these values."""

    # as typed, lower case: made a torch.device once, in the build
    device: str = "auto"
    profile: str = "quick"
    results_dir: str = RESULTS_DIR_DEFAULT
    store: str | None = None
    run_id: str | None = None
    data_root: str | None = None
    dataset: str = "auto"
    nproc: int | None = None
    target_accuracy: float | None = None
    builds: int | None = None
    build_seconds: float | None = None
    threads: int | None = None
    wait_quiet_s: float | None = None
    build_calls: int | None = None
    # the whole run's time, the profile's when --budget is not given; None: none
    run_budget_s: float | None = None
    model: ModelSpec | None = None
    profile_ops: bool = False

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> RunOptions:
        try:
            return cls.from_dict(json.loads(text))
        except (TypeError, ValueError, RecursionError) as error:
            raise ValueError(f"run options: {error}") from None

    @classmethod
    def from_dict(cls, data: Any) -> RunOptions:
        """The value a plan carries, its fields' kinds checked (ValueError: a fault, not a user's
        input)."""
        if not isinstance(data, dict) or set(data) - {f.name for f in fields(cls)}:
            raise ValueError(f"run options: not a RunOptions object: {str(data)[:80]}")
        model = data.get("model")
        if model is not None:
            if not isinstance(model, dict):
                raise ValueError("run options: model is not an object")
            model = ModelSpec(**{**model, "input_shape": tuple(model.get("input_shape") or ())})
        return checked_kinds(cls(**{**data, "model": model}))


# The Python kinds a JSON value may take for a message field of each annotation (a bool is no int
# here): the one table for the run options and the build's plan and answer (processes.protocol).
JSON_KINDS: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "str": (str,),
    "bool": (bool,),
    "str | None": (str, type(None)),
    "int | None": (int, type(None)),
    "float | None": (float, int, type(None)),
    "list[str]": (list,),
    "dict[str, float]": (dict,),
    "RunOptions": (dict,),
    "ModelSpec | None": (ModelSpec, type(None)),
}


def kind_mismatch(owner: str, name: str, annotation: Any, value: Any) -> str | None:
    """'Owner.name: value is not its kind', or None when `value` may stand in a field annotated
    so."""
    allowed = JSON_KINDS[str(annotation)]
    if isinstance(value, allowed) and (not isinstance(value, bool) or bool in allowed):
        return None
    return f"{owner}.{name}: {value!r} is not {annotation}"


def checked_kinds(options: RunOptions) -> RunOptions:
    for spec in fields(options):
        if problem := kind_mismatch(
            "RunOptions", spec.name, spec.type, getattr(options, spec.name)
        ):
            raise ValueError(problem)
    return options


def read_run_options(
    value: Callable[[str], Any], profile_budget_s: Callable[[str], float | None]
) -> RunOptions:
    """The options from a parser's values (`value(dest)`: argparse's or pytest's), each checked once
    here; a bad one is a UsageError naming the fix. `profile_budget_s(name)` knows the profiles (and
    refuses an unknown one)."""
    profile = str(value("profile")).strip().lower()
    budget = value("budget")
    return RunOptions(
        device=str(value("device")).strip().lower(),
        profile=profile,
        results_dir=str(value("results_dir")),
        store=value("store"),
        run_id=value("run_id"),
        data_root=value("data_root"),
        dataset=str(value("dataset")).strip().lower(),
        nproc=value("nproc"),
        target_accuracy=_checked_range(value),
        builds=value("builds"),
        build_seconds=value("build_seconds"),
        threads=value("threads"),
        wait_quiet_s=parse_duration(value("wait_quiet"), "--wait-quiet"),
        build_calls=value("build_calls"),
        run_budget_s=profile_budget_s(profile) if budget is None else parse_budget(budget),
        model=parse_model_options(value("model"), value("input"), value("input_ids")),
        profile_ops=bool(value("profile_ops")),
    )


def _checked_range(value: Callable[[str], Any]) -> float | None:
    """The numbers that have a range, each refused in one line outside it (NaN fails every test);
    the accuracy."""
    builds, build_s, calls, target = (
        value(name) for name in ("builds", "build_seconds", "build_calls", "target_accuracy")
    )
    if builds is not None and not 1 <= builds <= MAX_BUILDS:
        raise UsageError(f"--builds {builds}: use 1 to {MAX_BUILDS} builds per case")
    if build_s is not None and not 0 < build_s <= MAX_BUILD_SECONDS:
        raise UsageError(
            f"--build-seconds {build_s}: use a time in (0, {MAX_BUILD_SECONDS:g}] seconds, such "
            "as 0.05"
        )
    if calls is not None and not 1 <= calls <= MAX_BUILD_CALLS:
        raise UsageError(
            f"--build-calls {calls}: use 1 to {MAX_BUILD_CALLS} calls per build, such as 20"
        )
    if target is not None and not 0 < target < 1:
        raise UsageError(
            f"--target-accuracy {target} is outside (0, 1) — pass a test accuracy such as 0.85"
        )
    return target
