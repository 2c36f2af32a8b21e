from collections.abc import Mapping
from typing import Any

from gpubench.harness.core.workload_spec import IdRule, ReportSection, SummaryFigure, WorkloadSpec


def _scaling(best: Mapping[str, Any]) -> str:
    """A summary cell; empty on a machine that ran one process (nothing scaled)."""
    if best["world_size"] < 2:
        return ""
    return (
        f"{best['scaling_efficiency']:.2f} efficiency at {best['world_size']:.0f} processes "
        f"({best['samples_per_s']:.4g} samples/s, {best['backend']})"
    )


SPEC = WorkloadSpec(
    name="ddp",
    id_rule=IdRule(("parallel", "world_size", "backend", "batch_size")),
    # a launch is seconds of process start; steps give the spread
    builds={"smoke": 1, "quick": 1, "full": 1},
    markers=("slow", "training", "distributed"),
    headlines=(
        ("samples_per_s", "{:.4g} samples/s"),
        ("scaling_efficiency", "scaling efficiency {:.2f}"),
    ),
    summary=(
        SummaryFigure(
            "DDP scaling, most processes",
            "scaling_efficiency",
            _scaling,
            where={"parallel": "ddp"},
            at_largest="world_size",
        ),
    ),
    report=ReportSection(
        "Multi-process training",
        table=(
            "machine",
            "parallel",
            "backend",
            "world_size",
            "samples_per_s",
            "samples_per_s_per_rank",
            "step_s",
            "scaling_efficiency",
        ),
        order=100,
    ),
)
