"""`gpubench run --model module:factory --input SHAPE`: the options read, the factory loaded with
one-line errors, the cases swept, the training step and inference timed with their guards, and the
suite's and the model's bench modules collected apart. The factories are in
tests/model_factories.py."""

from __future__ import annotations

import csv
import functools
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from runs import GPUBENCH, summary_as_quick
from gpubench.harness.catalog.profiles import Profile
from gpubench.harness.budget import clock as run_clock
from gpubench.harness.core.model_spec import ModelSpec, parse_model_options
from gpubench.harness.core.exits import UsageError
from gpubench.harness.core.options import RunOptions
from gpubench.harness.core.stats import summarize
from gpubench.harness.measurement.cases import CaseSkipped, Diverged
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.measurement.timing import SyncedClock, install_build_clock
from gpubench.harness.pytest_plugin import plugin
from gpubench.harness.pytest_plugin.build_setup import checked_model, make_state
from gpubench.harness.pytest_plugin.modes import STATE
from gpubench.harness.workloads import model as workload
from gpubench.harness.workloads.common.user_model import check_model, make_model

ROOT = Path(__file__).resolve().parent.parent
CNN = ModelSpec("model_factories", "tiny_cnn", (3, 8, 8))
MLP = ModelSpec("model_factories", "tiny_mlp", (16,))
CPU = torch.device("cpu")


def ctx(
    spec: ModelSpec | None = CNN, profile: Profile = Profile.SMOKE, device: str = "cpu"
) -> BuildContext:
    return BuildContext(torch.device(device), profile, SyncedClock(CPU), model=spec)


def base(spec: ModelSpec = CNN, step: str = "train") -> workload.ModelCase:
    return next(c for c in workload.cases(ctx(spec)) if c.step == step)


@pytest.mark.parametrize(
    ("model", "shape", "fix"),
    [
        (
            None,
            "3x64x64",
            "--input 3x64x64 without --model: also pass the model, such as --model "
            "torchvision.models:resnet18",
        ),
        (
            "torchvision.models:resnet18",
            None,
            "needs --input: the shape of one sample, such as --input 3x64x64",
        ),
        ("torchvision.models.resnet18", "3x64x64", "name a factory as module:function"),
        ("torchvision models:resnet18", "3x64x64", "name a factory as module:function"),
        ("m:f", "3x", "give one sample's shape as sizes joined by 'x'"),
        ("m:f", "0x4", "give one sample's shape as sizes joined by 'x'"),
        ("m:f", "3*64*64", "give one sample's shape as sizes joined by 'x'"),
        ("m:f", "4096x4096x4096", "elements in one sample is above"),
    ],
)
def test_a_bad_model_or_input_is_one_line_that_names_the_fix(
    model: str | None, shape: str | None, fix: str
) -> None:
    with pytest.raises(UsageError) as error:
        parse_model_options(model, shape)
    assert fix in str(error.value) and "\n" not in str(error.value)


def test_the_options_read_a_dotted_factory_and_a_shape() -> None:
    assert parse_model_options(None, None) is None
    spec = parse_model_options(" pkg.models:Zoo.make ", "3X64x64")
    assert spec == ModelSpec("pkg.models", "Zoo.make", (3, 64, 64))
    assert (spec.target, spec.input_text) == ("pkg.models:Zoo.make", "3x64x64")


@pytest.mark.parametrize(
    ("factory", "module", "fix"),
    [
        (
            "tiny_cnn",
            "no_such_module_here",
            "cannot be imported (ModuleNotFoundError: No module named "
            "'no_such_module_here') — install it",
        ),
        (
            "no_such_factory",
            "model_factories",
            "has no attribute 'no_such_factory' — name a function or class",
        ),
        ("NOT_CALLABLE", "model_factories", "NOT_CALLABLE is a int, not callable"),
        ("raises", "model_factories", "calling raises() raised RuntimeError: weights file missing"),
        (
            "not_a_module",
            "model_factories",
            "not_a_module() returned a dict, not a torch.nn.Module",
        ),
        # not pytest's INTERNALERROR
        ("exits", "model_factories", "calling exits() raised SystemExit: 3"),
        (
            "make",
            "model_script",
            "module 'model_script' called sys.exit(2) as it was imported (a script that reads its "
            'command line?) — put that part under `if __name__ == "__main__":`',
        ),
    ],
)
def test_a_factory_that_cannot_make_the_model_is_one_line(
    factory: str, module: str, fix: str
) -> None:
    with pytest.raises(UsageError) as error:
        check_model(ModelSpec(module, factory, (16,)))
    assert fix in str(error.value) and "\n" not in str(error.value)


def test_a_factory_in_the_folder_the_command_runs_in_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As `python -c "import mine"` would (pytest's own command puts no current folder on
    sys.path)."""
    (tmp_path / "mine_in_cwd.py").write_text(
        "import torch\ndef make():\n    return torch.nn.Linear(4, 2)\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "mine_in_cwd", raising=False)
    assert isinstance(make_model(ModelSpec("mine_in_cwd", "make", (4,))), nn.Linear)


def test_an_input_the_model_cannot_take_is_one_line() -> None:
    with pytest.raises(
        UsageError,
        match=r"^--input 3x9x9: the model's forward of a float32 batch of shape \(2, 3, 9, "
        r"9\) raised RuntimeError: .* — give the shape of one sample the model "
        r"takes$",
    ):
        check_model(replace(MLP, input_shape=(3, 9, 9)))
    check_model(CNN)
    # (logits, extras) is trained on its logits
    check_model(ModelSpec("model_factories", "TupleOutput", (16,)))


def test_the_run_setup_refuses_a_bad_model_before_any_case(tmp_path: Path) -> None:
    run = RunOptions(
        results_dir=str(tmp_path), model=parse_model_options("model_factories:raises", "16")
    )
    with pytest.raises(
        UsageError, match="calling raises\\(\\) raised RuntimeError: weights file missing"
    ):
        make_state(run, None, None, collect_only=True)


def test_the_cases_sweep_one_setting_at_a_time_around_fp32_eager() -> None:
    # no --model: nothing to run
    assert workload.cases(ctx(None)) == []
    smoke = [c.test_id for c in workload.cases(ctx())]
    assert smoke == [
        f"model_factories.tiny_cnn-3x8x8-{step}-{setting}bs2"
        for step, setting in [
            ("train", "nocl-"),
            ("train", "bf16-nocl-"),
            ("train", "fp16-nocl-"),
            ("train", "cl-"),
            ("train", "nocl-ckpt-"),
            ("inference", "nocl-"),
            ("inference", "bf16-nocl-"),
            ("inference", "fp16-nocl-"),
            ("inference", "cl-"),
        ]
    ]
    quick = workload.cases(ctx(profile=Profile.QUICK))
    assert {c.batch_size for c in quick} == {8, 32} and [c.compile_mode for c in quick].count(
        "default"
    ) == 2
    # only the device's type is read: no GPU needed
    cuda = workload.cases(ctx(profile=Profile.FULL, device="cuda"))
    assert {c.compile_mode for c in cuda} == {"none", "default", "reduce-overhead", "max-autotune"}
    # not an image: no channels_last case
    flat = workload.cases(ctx(MLP))
    assert all(c.channels_last is None for c in flat) and len(flat) == 7


def test_a_training_step_trains_on_the_case_format_and_counts_samples() -> None:
    case = replace(base(), channels_last=True)
    timed = workload.set_up(case, ctx())
    try:
        step = timed.fn
        assert step.batch.is_contiguous(memory_format=torch.channels_last)
        losses = [float(step()) for _ in range(5)]
        # the target is fixed: the steps fit it
        assert losses[-1] < losses[0]
        figures = timed.figures(summarize([0.5]), None)
        assert (
            figures["samples_per_s"] == 4.0
            and figures["step_s"] == 0.5
            and figures["n_params"] == 140
        )
    finally:
        timed.cleanup()


def test_a_non_finite_loss_or_output_fails_the_row() -> None:
    nan = ModelSpec("model_factories", "NaNModel", (16,))
    for step in ("train", "inference"):
        timed = workload.set_up(base(nan, step), ctx(nan))
        result = [timed.fn() for _ in range(2)][-1]
        with pytest.raises(Diverged, match="not finite"):
            timed.figures(summarize([0.5]), result)
        timed.cleanup()
    timed = workload.set_up(base(MLP, "inference"), ctx(MLP))
    assert timed.figures(summarize([0.25]), timed.fn())["samples_per_s"] == 8.0
    timed.cleanup()


def test_settings_the_device_or_model_cannot_do_are_skipped_with_the_reason() -> None:
    with pytest.raises(CaseSkipped, match="fp16 on cpu has no fast kernels"):
        workload.set_up(replace(base(), precision="fp16"), ctx())
    bare = ModelSpec("model_factories", "Parameterless", (16,))
    with pytest.raises(CaseSkipped, match="has no trainable parameters"):
        workload.set_up(base(bare), ctx(bare))
    with pytest.raises(CaseSkipped, match="needs submodules with parameters to recompute"):
        workload.set_up(replace(base(bare), checkpointing=True), ctx(bare))


def test_checkpointing_recomputes_each_child_and_keeps_the_gradients() -> None:
    torch.manual_seed(0)
    plain = make_model(CNN)
    checkpointed = make_model(CNN)
    checkpointed.load_state_dict(plain.state_dict())
    assert workload.enable_checkpointing(checkpointed) is None
    wrapped = [
        child for child in checkpointed.children() if isinstance(child.forward, functools.partial)
    ]
    # conv, batch norm, linear: the children that hold parameters
    assert len(wrapped) == 3
    x = torch.randn(4, 3, 8, 8)
    for model in (plain, checkpointed):
        model(x).square().sum().backward()
    for a, b in zip(plain.parameters(), checkpointed.parameters()):
        torch.testing.assert_close(a.grad, b.grad)


def test_a_models_own_checkpointing_switch_is_used() -> None:
    class Switchable(nn.Module):
        supports_gradient_checkpointing = True

        def __init__(self) -> None:
            super().__init__()
            self.fc, self.enabled = nn.Linear(2, 2), False

        def gradient_checkpointing_enable(self) -> None:
            self.enabled = True

    model = Switchable()
    assert workload.enable_checkpointing(model) is None and model.enabled
    assert not isinstance(model.fc.forward, functools.partial)


def test_the_suites_bench_modules_and_the_models_exclude_each_other() -> None:
    def config(spec: ModelSpec | None) -> SimpleNamespace:
        return SimpleNamespace(stash={STATE: SimpleNamespace(ctx=SimpleNamespace(model=spec))})

    model_bench, matmul = (
        plugin.SUITE_BENCHES / "bench_model.py",
        plugin.SUITE_BENCHES / "bench_matmul.py",
    )
    assert (model_bench.exists(), matmul.exists()) == (True, True)
    assert plugin.pytest_ignore_collect(model_bench, config(None)) is True
    assert plugin.pytest_ignore_collect(matmul, config(None)) is None
    assert plugin.pytest_ignore_collect(model_bench, config(CNN)) is None
    assert plugin.pytest_ignore_collect(matmul, config(CNN)) is True
    # a user's own file of that name: not the suite's
    elsewhere = Path("/elsewhere/bench_model.py")
    assert plugin.pytest_ignore_collect(elsewhere, config(None)) is None
    # not a gpubench run: inert
    assert plugin.pytest_ignore_collect(model_bench, SimpleNamespace(stash={})) is None


@pytest.mark.process
def test_gpubench_run_times_a_model_from_the_current_folder(tmp_path: Path) -> None:
    """The whole path once, through the build processes gpubench run starts (the factory imported
    from the folder the command runs in); the suite's own cases are not run beside it."""
    done = subprocess.run(
        [
            *GPUBENCH,
            "run",
            "--device",
            "cpu",
            "--profile",
            "smoke",
            "--model",
            "model_factories:tiny_cnn",
            "--input",
            "3x8x8",
            "--results-dir",
            str(tmp_path),
            "--run-id",
            "mine",
        ],
        cwd=ROOT / "tests",
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    with open(tmp_path / "mine.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert {r["workload"] for r in rows} == {"model"} and len(rows) == 9
    assert {r["case_id"] for r in rows if r["status"] == "skipped"} == {
        "model/model_factories.tiny_cnn-3x8x8-train-fp16-nocl-bs2",
        "model/model_factories.tiny_cnn-3x8x8-inference-fp16-nocl-bs2",
    }
    ok = [r for r in rows if r["status"] == "ok"]
    assert len(ok) == 7 and all(
        float(r["samples_per_s"]) > 0 and int(r["peak_mem_bytes"]) > 0 for r in ok
    )
    assert {(r["model"], r["input_shape"]) for r in rows} == {("model_factories:tiny_cnn", "3x8x8")}
    report = (tmp_path / "mine-report" / "report.md").read_text(encoding="utf-8")
    assert "## Your model (--model)" in report and "Smoke-profile rows only" in report
    assert "| your model's training step, fastest | " in summary_as_quick(
        tmp_path / "mine.csv", tmp_path / "as-quick"
    )


@pytest.mark.process
def test_gpubench_run_refuses_a_bad_model_with_one_line(tmp_path: Path) -> None:
    """A factory that raises is found by the first build process, before any case: its one line,
    exit 4."""
    done = subprocess.run(
        [
            *GPUBENCH,
            "run",
            "--device",
            "cpu",
            "--profile",
            "smoke",
            "--model",
            "model_factories:raises",
            "--input",
            "16",
            "--results-dir",
            str(tmp_path),
        ],
        cwd=ROOT / "tests",
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    errors = [line for line in done.stderr.splitlines() if "weights file missing" in line]
    assert done.returncode == 4 and len(errors) == 1 and "Traceback" not in done.stderr, (
        done.stderr[-2000:]
    )
    assert not list(tmp_path.glob("*.csv"))


def test_a_factory_that_makes_float64_parameters_is_refused_and_torchs_default_dtype_put_back():
    """Rows labelled precision=fp32 and measured in float64 were ok before."""
    with pytest.raises(
        UsageError,
        match=r"^--model model_factories:float64_mlp: float64_mlp\(\) made float64 "
        r"parameters \(it set torch's default dtype to float64\); the suite makes "
        r"fp32, bf16 and fp16 itself from float32 ones",
    ):
        check_model(ModelSpec("model_factories", "float64_mlp", (16,)))
    assert torch.get_default_dtype() == torch.float32


def test_a_factory_that_changes_the_working_folder_leaves_the_run_where_it_was(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    make_model(ModelSpec("model_factories", "wanders", (16,)))
    assert os.getcwd() == str(tmp_path)


LM = ModelSpec("model_factories", "tiny_lm", (8,), vocab_size=64)


def test_token_ids_are_read_with_their_vocabulary_and_refused_in_one_line_when_wrong() -> None:
    spec = parse_model_options("model_factories:tiny_lm", "8", "64")
    assert spec == LM and spec.input_text == "8 ids<64"
    for text in ("0", "1", "-5", "lots", "64.5"):
        with pytest.raises(
            UsageError, match=r"^--input-ids .*: give the vocabulary size, a whole number from 2 up"
        ):
            parse_model_options("model_factories:tiny_lm", "8", text)
    with pytest.raises(UsageError, match=r"^--input-ids 64 needs --model and --input"):
        parse_model_options(None, None, "64")


def test_a_model_that_takes_token_ids_is_told_to_say_so_and_then_trains_on_them() -> None:
    with pytest.raises(
        UsageError,
        match=r"^--input 8: the model's forward of a float32 batch of shape \(2, 8\) raised "
        r".* — the model takes integer ids, not float32 values: add --input-ids "
        r"VOCAB",
    ):
        check_model(replace(LM, vocab_size=None))
    check_model(LM)
    # ids past the model's vocabulary (a GPT-2 size for a 64-token model): the number to use, not
    # the IndexError
    with pytest.raises(
        UsageError,
        match=r"raised IndexError: .* — token ids reach 50303 but the model's embedding "
        r"has 64 rows: use --input-ids 64$",
    ):
        check_model(replace(LM, vocab_size=50304))
    cases = workload.cases(ctx(LM))
    # ids are not an image
    assert all(c.channels_last is None for c in cases)
    assert (
        cases[0].test_id == "model_factories.tiny_lm-8-ids64-train-bs2"
        and cases[0].input_shape == "8 ids<64"
    )
    timed = workload.set_up(next(c for c in cases if c.step == "train"), ctx(LM))
    try:
        step = timed.fn
        assert step.batch.dtype == torch.int64 and int(step.batch.max()) < 64
        losses = [float(step()) for _ in range(5)]
        assert losses[-1] < losses[0]
    finally:
        timed.cleanup()
    inference = workload.set_up(next(c for c in cases if c.step == "inference"), ctx(LM))
    try:
        assert inference.fn() is not None
    finally:
        if inference.cleanup is not None:
            inference.cleanup()


# pytest-timeout's own SIGALRM would hold the cut off (cut_after)
@pytest.mark.timeout(60, method="thread")
def test_a_factory_that_never_returns_is_cut_after_the_budget_and_its_grace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(run_clock, "OVERRUN_GRACE_S", 0.05)
    spec = parse_model_options("model_factories:never_returns", "16")
    with pytest.raises(
        UsageError,
        match=r"^--model model_factories:never_returns: making the model and one forward "
        r"did not return within 60 ms \(the run's budget and its grace\) — make "
        r"the factory return",
    ):
        checked_model(spec, 0.01)


@pytest.mark.process
def test_a_factory_that_ends_the_process_itself_is_named_not_a_silent_exit_0(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [
            *GPUBENCH,
            "run",
            "--device",
            "cpu",
            "--profile",
            "smoke",
            "--model",
            "model_factories:leaves",
            "--input",
            "16",
            "--results-dir",
            str(tmp_path),
        ],
        cwd=ROOT / "tests",
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert (
        "build 1 of 1 ended with exit 0 before pytest finished, without a word: its code (a "
        "--model factory, a conftest or a test) called os._exit: no rows were written"
        in done.stderr
    )


def test_a_relative_results_folder_is_fixed_at_setup_so_a_chdir_in_user_code_sends_no_row_elsewhere(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    run = RunOptions(results_dir="res", model=parse_model_options("model_factories:wanders", "16"))
    state, _ = make_state(run, None, None, collect_only=True)
    install_build_clock(state.previous_clock)
    # the factory's chdir undone too
    assert state.records.results_dir == tmp_path / "res" and Path.cwd() == tmp_path
