"""gpubench's run options, declared once for both the pytest plugin and `gpubench run`'s parser. Torch-free: the CLI
imports it before deciding whether to load torch."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable


@dataclass(frozen=True)
class Option:
    flag: str
    default: Any
    help: str
    type: Callable[[str], Any] | None = str  # None: an on/off switch

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def namespaced(self) -> str:
        """The pytest form that cannot collide with another plugin's option (`--gpubench-profile`)."""
        return "--gpubench-" + self.flag.lstrip("-")

    @property
    def pytest_dest(self) -> str:
        """pytest's dest, namespaced too: argparse refuses two options sharing a dest (pytest-profiling's `profile`)."""
        return "gpubench_" + self.dest

    def kwargs(self, dest: str | None = None) -> dict[str, Any]:
        dest = dest or self.dest
        if self.type is None:
            return {"action": "store_true", "default": False, "help": self.help, "dest": dest}
        return {"default": self.default, "type": self.type, "help": self.help, "dest": dest}

    def to_argv(self, value: Any) -> list[str]:
        """The pytest argument that carries `value` (namespaced), or nothing when it is the default."""
        if value == self.default or value is None:
            return []
        return [self.namespaced] if self.type is None else [f"{self.namespaced}={value}"]


RESULTS_DIR_DEFAULT = "results"

RUN_OPTIONS: tuple[Option, ...] = (
    Option("--device", "auto", "device to benchmark: auto (cuda > mps > cpu), cpu, cuda, cuda:N, mps; cuda:all "
           "(gpubench run only): the micro cases on each GPU in turn, one run each, one report"),
    Option("--profile", "quick", "quick (default; minutes on a 2-core CPU), full (every size and setting), "
           "smoke (tiny; tests the suite itself, figures meaningless)"),
    Option("--results-dir", RESULTS_DIR_DEFAULT, "folder for the run's CSV and sidecars (default: results/)"),
    Option("--store", None, "results store: write into STORE/<machine>/ (host name + hardware hash, "
           "resolved on the machine that runs) instead of --results-dir"),
    Option("--run-id", None, "name of this run's files (default: UTC time, host, pid)"),
    Option("--data-root", None, "where MNIST / Fashion-MNIST live (default: ~/.cache/gpubench/data)"),
    Option("--dataset", "auto", "training data: auto, mnist, fashion-mnist, synthetic "
           "(default auto: mnist > fashion-mnist > synthetic)"),
    Option("--nproc", None, "processes for the distributed (DDP) cases "
           "(default: the GPU count on cuda, 2 on cpu)", int),
    Option("--target-accuracy", None, "test accuracy the time_to_accuracy cases train to, in (0, 1) "
           "(default: 0.98 on MNIST, 0.85 on Fashion-MNIST)", float),
    Option("--builds", None, "independent builds of every case, each in its own process under gpubench run "
           "(default: the profile's, per workload)", int),
    Option("--build-seconds", None, "timed seconds per build of a micro-benchmark case "
           "(default: the profile's: smoke 0.05, quick 0.1, full 0.3)", float),
    Option("--threads", None, "torch threads of each build process (default: torch's, one per core); fewer than the "
           "free cores keeps builds from waiting on a busy core", int),
    Option("--wait-quiet", None, "before the first case, wait up to this long (90s, 10m) for other processes to "
           "leave the CPU and GPU; then measure anyway, flagged busy (default: measure at once)"),
    Option("--build-calls", None, "timed calls per build of a micro-benchmark case, at least "
           "(default: the profile's rounds decide)", int),
    Option("--budget", None, "time for the whole run, all builds (90s, 4m, 1h, or none): each case gets a share of "
           "what is left and is capped (fewer rounds) or skipped when one call does not fit it "
           "(default: the profile's: quick 5m; smoke and full none)"),
    Option("--model", None, "benchmark your own model instead of the suite: a factory of an nn.Module as "
           "module:function (e.g. torchvision.models:resnet18), its training step and inference over the suite's "
           "settings; needs --input"),
    Option("--input", None, "with --model: the shape of one sample, sizes joined by 'x' without the batch size "
           "(e.g. 3x64x64)"),
    Option("--input-ids", None, "with --model and --input: the sample is integer token ids (int64) below this "
           "vocabulary size, as a language model takes (e.g. --input 256 --input-ids 50304)"),
    Option("--profile-ops", False, "also run a few steps of each training case under torch.profiler and store "
           "the top 15 ops", None),
)


def add_to_parser(parser: argparse.ArgumentParser | argparse._ArgumentGroup,
                  leave_out: tuple[str, ...] = ()) -> None:
    """The run options on a subcommand's parser, less the flags in `leave_out` (which it defines itself)."""
    for option in RUN_OPTIONS:
        if option.flag not in leave_out:
            parser.add_argument(option.flag, **option.kwargs())


def to_pytest_argv(values: argparse.Namespace) -> list[str]:
    return [arg for option in RUN_OPTIONS for arg in option.to_argv(getattr(values, option.dest))]
