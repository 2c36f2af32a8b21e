from dataclasses import replace

import pytest
import torch

from gpubench.harness.catalog.mnist_epoch import GUIDE_TEMPLATE
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.catalog.profiles import check_profile
from gpubench.harness.core.exits import UsageError
from gpubench.harness.measurement.timing import SyncedClock
from gpubench.harness.workloads import (
    ddp,
    elementwise,
    inference,
    matmul,
    memory_strategies,
    mnist_epoch,
    selfcheck,
    speedup,
    transfer,
)
from gpubench.harness.workloads.common.epoch import PRELOADED, TEMPLATE, EpochCase

CPU = torch.device("cpu")
WORKLOADS = (
    matmul,
    speedup,
    selfcheck,
    elementwise,
    transfer,
    inference,
    mnist_epoch,
    memory_strategies,
    ddp,
)


def context(profile: str, device: torch.device = CPU, nproc: int = 2) -> BuildContext:
    return BuildContext(device, profile, SyncedClock(CPU), nproc)


def test_case_identity_is_data():
    case = matmul.MatmulCase("bf16", 1024)
    assert case.settings() == {"dtype": "bf16", "size": 1024}
    assert case.case_id == "matmul/bf16-n1024"


def test_cases_with_defaults_are_named_by_what_they_change():
    assert TEMPLATE.case_id == "mnist_epoch/guide-template"
    assert EpochCase(batch_size=1024).test_id == "dataloader-bs1024"
    assert (
        replace(PRELOADED, precision="bf16", channels_last=True, batch_size=1024).case_id
        == "mnist_epoch/preloaded-bf16-cl-bs1024"
    )
    assert (
        TEMPLATE.effective_batch == 256
        and EpochCase(batch_size=64, accumulation_steps=4).effective_batch == 256
    )


def test_settings_a_case_does_not_use_are_absent():
    assert (
        PRELOADED.num_workers is None
        and PRELOADED.pin_memory is None
        and PRELOADED.prefetch_factor is None
    )
    assert PRELOADED.test_id == "preloaded"


def test_the_id_rule_knows_the_guide_template():
    assert {k: v for k, v in TEMPLATE.settings().items() if k in GUIDE_TEMPLATE} == GUIDE_TEMPLATE


@pytest.mark.parametrize("profile", ["quick", "full"])
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_every_case_id_is_short_and_unique(profile, device):
    ctx = context(profile, torch.device(device), nproc=8)
    ids = [c.case_id for module in WORKLOADS for c in module.cases(ctx)]
    assert len(ids) == len(set(ids))
    assert max(map(len, ids)) <= 60, max(ids, key=len)


def test_guide_template_matches_the_guide():
    assert (TEMPLATE.loader, TEMPLATE.batch_size, TEMPLATE.num_workers, TEMPLATE.pin_memory) == (
        "dataloader",
        256,
        4,
        True,
    )
    assert (TEMPLATE.precision, TEMPLATE.compile_mode) == ("fp32", "none")


@pytest.mark.parametrize(
    "profile, device", [("quick", "cpu"), ("quick", "cuda"), ("full", "cpu"), ("full", "cuda")]
)
def test_epoch_profiles_keep_the_template_and_the_best_candidates(profile, device):
    cases = mnist_epoch.cases(context(profile, torch.device(device)))
    # its precision and memory format come from the machine's race
    best = replace(PRELOADED, raced=True)
    assert TEMPLATE in cases and best in cases
    # the fp32 preloaded step is left out only where an epoch costs tens of seconds: the quick CPU
    # profile
    assert (PRELOADED in cases) == ((profile, device) != ("quick", "cpu"))
    assert len(cases) == len(set(cases))


def test_full_profile_sweeps_every_setting():
    cases = mnist_epoch.cases(context("full", torch.device("cuda")))
    for field, values in {
        "compile_mode": {"default", "reduce-overhead", "max-autotune"},
        "precision": {"fp16", "bf16"},
        "checkpointing": {True},
        "accumulation_steps": {4},
        "freeze_features": {True},
        "persistent_workers": {True},
        "pin_memory": {False},
        "prefetch_factor": {4},
    }.items():
        assert values <= {getattr(c, field) for c in cases}, field


@pytest.mark.parametrize("native", [False, True])
def test_a_cpu_matmul_ladder_stops_early_in_a_dtype_the_cpu_emulates(monkeypatch, native):
    """bf16 without a native kernel took 65 s for one n=2048 product (0.26 GFLOP/s) on a 2-core VM,
    whose n/4 probe had promised 13 s: such a dtype stops at n=512 in the quick profile, a native
    one does not."""
    monkeypatch.setattr(
        matmul, "cpu_computes_natively", lambda dtype: native or dtype in ("fp32", "tf32")
    )
    sizes = {
        dtype: {c.size for c in matmul.cases(context("quick")) if c.dtype == dtype}
        for dtype in ("fp32", "fp16", "bf16")
    }
    assert sizes["fp32"] == {512, 1024, 2048}
    assert sizes["bf16"] == sizes["fp16"] == ({512, 1024, 2048} if native else {512})
    assert {
        c.size for c in matmul.cases(context("quick", torch.device("cuda"))) if c.dtype == "fp16"
    } == {1024, 2048, 4096, 8192}


def test_every_workload_lists_cases_per_profile():
    for module in (matmul, elementwise, transfer, inference, mnist_epoch):
        for profile in ("smoke", "quick", "full"):
            assert module.cases(context(profile)), (module.__name__, profile)


def test_unknown_profile():
    assert check_profile("full") == "full"
    with pytest.raises(UsageError, match="--profile quick, full or smoke"):
        check_profile("fast")
