"""Reference figures per known device (reports/references.json), loaded and validated. `gpubench`
entries come from a gpubench run and are what the health check compares against; `published` entries
are maxima measured another way (mamf-finder's best bf16 matmul over a shape search), shown as
ratios and never flagged."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from gpubench.harness.records.safe_files import RefusedPath, read_json

from gpubench.harness.core.exits import UsageError

DEFAULT_PATH = Path(__file__).parent.parent / "references.json"
KINDS = ("gpubench", "published")


@dataclass(frozen=True)
class Figure:
    """A headline figure the health check reads from a machine's rows."""

    label: str
    unit: str
    higher_is_better: bool


FIGURES: dict[str, Figure] = {
    "matmul_fp32_tflops": Figure("matmul fp32, best", "TFLOP/s", True),
    "matmul_tf32_tflops": Figure("matmul tf32, best", "TFLOP/s", True),
    "matmul_fp16_tflops": Figure("matmul fp16, best", "TFLOP/s", True),
    "matmul_bf16_tflops": Figure("matmul bf16, best", "TFLOP/s", True),
    "h2d_pinned_gbps": Figure("host→device, pinned", "GB/s", True),
    "d2h_pinned_gbps": Figure("device→host, pinned", "GB/s", True),
    "dram_gbps": Figure("memory bandwidth (DRAM)", "GB/s", True),
    "template_epoch_s": Figure("guide-template epoch", "s", False),
}
FINGERPRINT_FIELDS = ("gpu_power_limit_w", "gpu_sm_clock_mhz")


@dataclass(frozen=True)
class Reference:
    device_name: str
    figure: str
    value: float
    kind: str
    source: str


@dataclass(frozen=True)
class References:
    figures: tuple[Reference, ...]
    # device name -> field -> the reference run's value
    fingerprint: dict[str, dict[str, float]]

    def for_device(self, device_name: str, kind: str | None = None) -> list[Reference]:
        return [
            r
            for r in self.figures
            if r.device_name == device_name and (kind is None or r.kind == kind)
        ]


def _number(value: object, where: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise UsageError(f"{where}: value {value!r} is not a positive number — fix the entry")
    return float(value)


def _figure(device: str, entry: object, where: str) -> Reference:
    if not isinstance(entry, dict):
        raise UsageError(
            f"{where}: expected an object with figure, value, kind, source — fix the entry"
        )
    figure, kind, source = entry.get("figure"), entry.get("kind"), entry.get("source")
    if figure not in FIGURES:
        raise UsageError(f"{where}: unknown figure {figure!r} — use one of {', '.join(FIGURES)}")
    if kind not in KINDS:
        raise UsageError(f"{where}: kind {kind!r} — use one of {', '.join(KINDS)}")
    if not isinstance(source, str) or not source.strip():
        raise UsageError(f"{where}: no source — every reference names where its number comes from")
    return Reference(device, figure, _number(entry.get("value"), where), kind, source)


def _fingerprint(fields: object, where: str) -> dict[str, float]:
    if not isinstance(fields, dict):
        raise UsageError(
            f"{where}: fingerprint must be an object of field -> {{value, source}} — fix the entry"
        )
    out = {}
    for name, entry in fields.items():
        if name not in FINGERPRINT_FIELDS:
            raise UsageError(
                f"{where}.{name}: unknown fingerprint field — use one of "
                f"{', '.join(FINGERPRINT_FIELDS)}"
            )
        if not isinstance(entry, dict) or not str(entry.get("source", "")).strip():
            raise UsageError(
                f"{where}.{name}: expected {{value, source}} with a source — fix the entry"
            )
        out[name] = _number(entry.get("value"), f"{where}.{name}")
    return out


def parse_references(data: object, origin: str) -> References:
    """Validated references from the decoded JSON; a bad entry is one UsageError naming it."""
    if (
        not isinstance(data, dict)
        or data.get("version") != 1
        or not isinstance(data.get("devices"), dict)
    ):
        raise UsageError(
            f'{origin}: expected {{"version": 1, "devices": {{...}}}} — see docs/health.md'
        )
    figures: list[Reference] = []
    fingerprint: dict[str, dict[str, float]] = {}
    for device, body in data["devices"].items():
        where = f"{origin}: devices[{device!r}]"
        if not isinstance(body, dict) or not isinstance(body.get("figures", []), list):
            raise UsageError(f'{where}: expected {{"figures": [...]}} — see docs/health.md')
        figures += [
            _figure(device, entry, f"{where}.figures[{i}]")
            for i, entry in enumerate(body.get("figures", []))
        ]
        if "fingerprint" in body:
            fingerprint[device] = _fingerprint(body["fingerprint"], f"{where}.fingerprint")
    return References(tuple(figures), fingerprint)


MAX_REFERENCES_BYTES = 16 * 2**20


def load_references(path: Path = DEFAULT_PATH) -> References:
    try:
        data = read_json(path, MAX_REFERENCES_BYTES, "references file")
    except RefusedPath as error:
        raise UsageError(f"{error}; restore reports/references.json") from None
    except OSError as error:
        raise UsageError(
            f"{path}: cannot read the references ({error.strerror}) "
            "— restore reports/references.json"
        ) from None
    except ValueError as error:
        raise UsageError(f"{path}: not JSON ({error}) — fix the file") from None
    return parse_references(data, str(path))
