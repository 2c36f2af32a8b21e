import pytest
import torch

from harness.cases import ProfileError, check_profile
from harness.workloads import elementwise, inference, matmul, mnist_epoch, transfer
from harness.workloads.mnist_epoch import PRELOADED, TEMPLATE, EpochCase

CPU = torch.device("cpu")


def test_case_identity_is_data():
    case = matmul.MatmulCase("bf16", 1024)
    assert case.settings() == {"dtype": "bf16", "size": 1024}
    assert case.case_id == "matmul/dtype=bf16-size=1024"


def test_cases_with_defaults_are_named_by_what_they_change():
    assert TEMPLATE.case_id == "mnist_epoch/guide-template"
    assert EpochCase(batch_size=1024).test_id == "batch_size=1024"
    assert TEMPLATE.effective_batch == 256 and EpochCase(batch_size=64, accumulation_steps=4).effective_batch == 256


def test_guide_template_matches_the_guide():
    assert (TEMPLATE.loader, TEMPLATE.batch_size, TEMPLATE.num_workers, TEMPLATE.pin_memory) == ("dataloader", 256, 4, True)
    assert (TEMPLATE.precision, TEMPLATE.compile_mode) == ("fp32", "none")


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_epoch_profiles_keep_the_template_and_the_best_candidates(profile):
    cases = mnist_epoch.cases(profile, CPU)
    assert TEMPLATE in cases and PRELOADED in cases
    assert len(cases) == len(set(cases))


def test_full_profile_sweeps_every_setting():
    cases = mnist_epoch.cases("full", torch.device("cuda"))
    for field, values in {"compile_mode": {"default", "reduce-overhead", "max-autotune"}, "precision": {"fp16", "bf16"},
                          "checkpointing": {True}, "accumulation_steps": {4}, "freeze_features": {True},
                          "persistent_workers": {True}, "pin_memory": {False}, "prefetch_factor": {4}}.items():
        assert values <= {getattr(c, field) for c in cases}, field


def test_cpu_fp16_matmul_ladder_is_capped():
    sizes = {c.size for c in matmul.cases("quick", CPU) if c.dtype == "fp16"}
    assert sizes == {512}
    assert {c.size for c in matmul.cases("quick", torch.device("cuda")) if c.dtype == "fp16"} == {1024, 2048, 4096, 8192}


def test_every_workload_lists_cases_per_profile():
    for module in (matmul, elementwise, transfer, inference, mnist_epoch):
        for profile in ("smoke", "quick", "full"):
            assert module.cases(profile, CPU), (module.__name__, profile)


def test_unknown_profile():
    assert check_profile("full") == "full"
    with pytest.raises(ProfileError, match="--profile quick, full or smoke"):
        check_profile("fast")
