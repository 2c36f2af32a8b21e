"""`gpubench fleet --target KEY=VALUE,...`: where one job runs (Slurm's partition, generic resources,
constraint, node list, CPUs, time limit, the run's device), parsed and checked before any job is
submitted. Torch-free."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gpubench.harness.records.store import safe_name
from gpubench.harness.core.exits import UsageError

DEFAULT_TIME_MIN = 60
TARGET_KEYS = ("name", "partition", "gres", "time", "constraint", "nodelist", "cpus", "device")
SLURM_ONLY_KEYS = ("partition", "gres", "constraint", "nodelist", "cpus")
MAX_TARGET_CHARS = 1024  # partitions, node lists and constraints run to tens of characters
MAX_TIME_MIN = 365 * 24 * 60  # a year: past it, a time limit is a typo (Slurm took 99999999999999999999 silently)


@dataclass(frozen=True)
class Target:
    """Where one job runs (Slurm's sbatch options); `device` is the run's --device there."""

    name: str
    partition: str | None = None
    gres: str | None = None
    time_min: int = DEFAULT_TIME_MIN
    constraint: str | None = None
    nodelist: str | None = None
    cpus: int | None = None
    device: str | None = None

    def slurm_parameters(self) -> dict[str, Any]:
        """submitit.SlurmExecutor's parameters (sbatch's --partition, --gres, --time, ...)."""
        wanted = {"job_name": f"gpubench-{self.name}", "time": self.time_min, "partition": self.partition,
                  "gres": self.gres, "constraint": self.constraint, "nodelist": self.nodelist,
                  "cpus_per_task": self.cpus}
        return {key: value for key, value in wanted.items() if value is not None}

    def slurm_only(self) -> list[str]:
        return [key for key in SLURM_ONLY_KEYS if getattr(self, key) is not None]


def ascii_digits(text: str) -> bool:
    """0-9 only: str.isdigit takes '²' and '٣', which int() then refuses or reads as another number."""
    return re.fullmatch(r"[0-9]+", text) is not None


def parse_minutes(text: str) -> int:
    """`30` (minutes), `2:00:00` or `90:00` (Slurm's H:MM:SS and MM:SS) -> whole minutes."""
    parts = text.split(":")
    if not all(ascii_digits(part) for part in parts) or not 1 <= len(parts) <= 3:
        raise UsageError(f"time={text}: give minutes (time=30) or H:MM:SS (time=2:00:00)")
    seconds = sum(int(part) * scale for part, scale in zip(reversed(parts), (1, 60, 3600) if len(parts) > 1 else (60,)))
    if seconds < 60:
        raise UsageError(f"time={text}: a time limit under a minute cannot run the suite — give time=30 or more")
    if seconds > MAX_TIME_MIN * 60:
        raise UsageError(f"time={text}: over a year — give minutes (time=30) or H:MM:SS (time=2:00:00)")
    return -(-seconds // 60)


def parse_target(text: str, index: int) -> Target:
    """`partition=gpu,gres=gpu:1,time=30`; named by name=, else the partition, node list, constraint or device."""
    fields = target_fields(text)
    cpus = fields.get("cpus")
    if cpus is not None and not ascii_digits(cpus):
        raise UsageError(f"--target {text!r}: cpus={cpus} is not a whole number")
    label = (fields.get("name") or fields.get("partition") or fields.get("nodelist") or fields.get("constraint")
             or fields.get("device") or f"target{index}")
    return Target(name=safe_name(label)[:40], partition=fields.get("partition"), gres=fields.get("gres"),
                  time_min=parse_minutes(fields["time"]) if "time" in fields else DEFAULT_TIME_MIN,
                  constraint=fields.get("constraint"), nodelist=fields.get("nodelist"),
                  cpus=int(cpus) if cpus else None, device=fields.get("device"))


def target_fields(text: str) -> dict[str, str]:
    """key -> value of one --target; an empty one, an unknown key or a key given twice is refused
    (the last of two silently won, and an empty --target ran a job nobody asked for)."""
    fields: dict[str, str] = {}
    if len(text) > MAX_TARGET_CHARS:  # named by its start: the whole of it filled the terminal, twice
        raise UsageError(f"--target {text[:40]!r}... is {len(text)} characters long: no target needs more than "
                         f"{MAX_TARGET_CHARS} — check how it was made")
    items = [part.strip() for part in text.split(",") if part.strip()]
    if not items:
        raise UsageError(f"--target {text!r} is empty — give key=value pairs (--target partition=gpu,time=30), "
                         "or no --target for one job here")
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not value or key not in TARGET_KEYS:
            raise UsageError(f"--target {text!r}: {item!r} is not one of {', '.join(k + '=' for k in TARGET_KEYS)} "
                             "— e.g. --target partition=gpu,gres=gpu:1,time=30")
        if key in fields:
            raise UsageError(f"--target {text!r}: {key}= is given twice — give it once")
        unprintable = [char for char in value if not char.isprintable()]
        if unprintable:  # a control character went on into the sbatch script, where sbatch refused it without naming it
            raise UsageError(f"--target {text!r}: {key}={value!r} holds the control character {unprintable[0]!r} — "
                             "give plain text")
        foreign = [char for char in value if not char.isascii()]
        # 'gрu' (Cyrillic р) went to sbatch, refused as if gpu; name= is made file-safe, cpus= and time= are numbers
        if foreign and key not in ("name", "cpus", "time"):
            raise UsageError(f"--target {text!r}: {key}={value} holds {foreign[0]!r} (U+{ord(foreign[0]):04X}), which "
                             "is not ASCII: Slurm and torch name nothing so — type the value in ASCII")
        fields[key] = value
    return fields


def parse_targets(texts: list[str] | None) -> list[Target]:
    """The targets in order; none given: one on this machine. Names must differ (they name the runs)."""
    targets = [parse_target(text, index + 1) for index, text in enumerate(texts or ["name=local"])]
    seen: set[str] = set()
    for target in targets:
        if target.name in seen:
            raise UsageError(f"two targets are named {target.name!r} — give each its own name=, "
                             "e.g. --target partition=gpu,name=gpu-b")
        seen.add(target.name)
    return targets
