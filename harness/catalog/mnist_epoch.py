from typing import Any

from gpubench.harness.core.workload_spec import IdRule, ReportSection, WorkloadSpec

# The template epoch (a tutorial's usual MNIST setup); EpochCase's field defaults equal these (a
# test pins it).
GUIDE_TEMPLATE: dict[str, Any] = {
    "loader": "dataloader",
    "num_workers": 4,
    "pin_memory": True,
    "non_blocking": True,
    "persistent_workers": False,
    "prefetch_factor": None,
    "precision": "fp32",
    "channels_last": False,
    "compile_mode": "none",
    "checkpointing": False,
    "accumulation_steps": 1,
    "freeze_features": False,
    "batch_size": 256,
    "model": "cnn",
    "raced": False,
}

SPEC = WorkloadSpec(
    name="mnist_epoch",
    id_rule=IdRule(tuple(GUIDE_TEMPLATE), GUIDE_TEMPLATE, frozenset({"loader"}), "guide-template"),
    # an epoch is long; its windows give the spread
    builds={"smoke": 1, "quick": 1, "full": 3},
    markers=("slow", "training"),
    headlines=(
        ("epoch_s", "epoch {:.3g} s"),
        ("samples_per_s", "{:.4g} samples/s"),
        ("test_accuracy", "accuracy {:.3f}"),
        ("data_wait_frac", "data wait {:.0%}"),
    ),
    report=ReportSection("MNIST training epoch", renderer="mnist_epoch", order=60),
)
