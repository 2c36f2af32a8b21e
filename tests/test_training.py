"""Correctness the training workloads rest on: accumulation, checkpointing, AMP, loaders."""

import gzip
import os
import struct
from pathlib import Path

import pytest
import torch

from gpubench.harness.measurement.cases import Diverged
from gpubench.harness.measurement.context import BuildContext
from gpubench.harness.devices.data_source import DataSource, PreloadedLoader
from gpubench.harness.devices.datasets import (
    ImageDataset,
    Split,
    check_dataset_request,
    install_fashion_mnist,
    load_split,
    normalize_all,
    resolve_dataset,
)
from gpubench.harness.core.exits import UsageError
from gpubench.harness.core.stats import summarize
from gpubench.harness.measurement.timing import SyncedClock
from gpubench.harness.workloads import mnist_epoch
from gpubench.harness.workloads.common import epoch
from gpubench.harness.workloads.common.epoch import (
    EpochCase,
    fresh_compile_caches,
    make_loaders,
    skip_reason,
)
from gpubench.harness.workloads.common.models import make_model
from gpubench.harness.workloads.common.train_loop import EpochResult, Trainer, run_epoch

DEVICE = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def batch(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, 1, 28, 28, generator=gen), torch.randint(0, 10, (n,), generator=gen)


def grads(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]


def accumulate_grads(model: torch.nn.Module, micro_batches, steps: int) -> list[torch.Tensor]:
    criterion = torch.nn.CrossEntropyLoss()
    for x, y in micro_batches:
        (criterion(model(x), y) / steps).backward()
    return grads(model)


def test_accumulation_equals_one_large_batch():
    x, y = batch(64)
    # eval: no dropout, so both paths see the same function
    model = make_model("cnn").eval()
    reference = accumulate_grads(model, [(x, y)], 1)
    model.zero_grad()
    accumulated = accumulate_grads(
        model, [(x[i : i + 16], y[i : i + 16]) for i in range(0, 64, 16)], 4
    )
    for a, b in zip(reference, accumulated):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_trainer_accumulation_steps_only_after_n_micro_batches():
    trainer = Trainer(
        make_model("mlp"),
        torch.device("cpu"),
        accumulation_steps=3,
        clock=SyncedClock(torch.device("cpu")),
    )
    before = [p.detach().clone() for p in trainer.model.parameters()]
    x, y = batch(8)
    trainer.micro_step(x, y)
    trainer.micro_step(x, y)
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))
    trainer.micro_step(x, y)
    assert not all(torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))


def test_checkpointing_gives_the_same_loss_and_gradients():
    x, y = batch(32)
    plain, checkpointed = make_model("cnn", seed=3), make_model("cnn", checkpointing=True, seed=3)
    torch.manual_seed(7)
    loss_plain = torch.nn.functional.cross_entropy(plain(x), y)
    loss_plain.backward()
    # same dropout mask
    torch.manual_seed(7)
    loss_ckpt = torch.nn.functional.cross_entropy(checkpointed(x), y)
    loss_ckpt.backward()
    torch.testing.assert_close(loss_plain, loss_ckpt)
    for a, b in zip(grads(plain), grads(checkpointed)):
        torch.testing.assert_close(a, b)


def train_losses(precision: str, steps: int = 8) -> tuple[Trainer, list[float]]:
    trainer = Trainer(make_model("mlp"), DEVICE, precision, lr=1e-2, clock=SyncedClock(DEVICE))
    x, y = batch(128)
    x, y = x.to(DEVICE), y.to(DEVICE)
    losses = []
    for _ in range(steps):
        trainer.loss_sum.zero_()
        trainer.seen = 0
        trainer.step([(x, y)])
        losses.append(trainer.loss_sum.item() / trainer.seen)
    return trainer, losses


@pytest.mark.parametrize("precision, uses_scaler", [("fp16", True), ("bf16", False)])
def test_mixed_precision_trains(precision, uses_scaler):
    trainer, losses = train_losses(precision)
    assert (trainer.scaler is not None) == uses_scaler
    assert losses[-1] < 0.5 * losses[0]


def test_fp16_on_cpu_is_a_skipped_row_not_a_crash():
    reason = skip_reason(EpochCase(precision="fp16"), torch.device("cpu"))
    assert reason and "bf16" in reason
    assert (
        skip_reason(EpochCase(num_workers=0, persistent_workers=True), torch.device("cpu"))
        is not None
    )


def nhwc_strided(tensor: torch.Tensor) -> bool:
    """Laid out channels-last, and not also in the default layout (a one-channel tensor is both)."""
    return tensor.is_contiguous(memory_format=torch.channels_last) and not tensor.is_contiguous()


def test_channels_last_trains_to_the_same_loss():
    """Two training steps through Trainer.step: with channels_last the second convolution's weight
    and every convolution's output are NHWC in memory, the parameters move, and each step's loss
    is the default layout's (the same seed and dropout masks)."""
    x, y = batch(16)
    plain = Trainer(
        make_model("cnn", seed=1), torch.device("cpu"), clock=SyncedClock(torch.device("cpu"))
    )
    nhwc = Trainer(
        make_model("cnn", seed=1),
        torch.device("cpu"),
        channels_last=True,
        clock=SyncedClock(torch.device("cpu")),
    )
    conv_outputs = []
    for layer in nhwc.model.modules():
        if isinstance(layer, torch.nn.Conv2d):
            layer.register_forward_hook(lambda module, inputs, output: conv_outputs.append(output))
    before = [p.detach().clone() for p in nhwc.model.parameters()]
    losses = {}
    for name, trainer in (("plain", plain), ("nhwc", nhwc)):
        # the same dropout masks in both
        torch.manual_seed(7)
        losses[name] = []
        for _ in range(2):
            trainer.loss_sum.zero_()
            trainer.seen = 0
            trainer.step([(x, y)])
            losses[name].append(trainer.loss_sum.item() / trainer.seen)
    assert nhwc_strided(nhwc.model.features[3].weight) and not nhwc_strided(
        plain.model.features[3].weight
    )
    # 2 convolutions x 2 steps
    assert len(conv_outputs) == 4 and all(nhwc_strided(out) for out in conv_outputs)
    # every parameter trained
    assert not any(torch.equal(a, b) for a, b in zip(before, nhwc.model.parameters()))
    # the second step saw the first step's update
    assert losses["nhwc"][1] != losses["nhwc"][0]
    torch.testing.assert_close(losses["nhwc"], losses["plain"], rtol=1e-4, atol=1e-5)


def write_idx(folder, name, array: torch.Tensor) -> None:
    """IDX format: magic (0, 0, dtype 0x08 = uint8, ndim), big-endian sizes, raw bytes."""
    header = struct.pack(">BBBB", 0, 0, 8, array.dim()) + struct.pack(
        f">{array.dim()}I", *array.shape
    )
    with gzip.open(folder / f"{name}.gz", "wb") as handle:
        handle.write(header + array.numpy().tobytes())


@pytest.fixture
def small_idx(tmp_path):
    """A Debian-like folder of gzipped IDX files: 96 train and 40 test images."""
    system = tmp_path / "system"
    system.mkdir()
    gen = torch.Generator().manual_seed(0)
    for prefix, n in (("train", 96), ("t10k", 40)):
        write_idx(
            system,
            f"{prefix}-images-idx3-ubyte",
            torch.randint(0, 256, (n, 28, 28), dtype=torch.uint8, generator=gen),
        )
        write_idx(
            system,
            f"{prefix}-labels-idx1-ubyte",
            torch.randint(0, 10, (n,), dtype=torch.uint8, generator=gen),
        )
    return system


def test_fashion_mnist_is_installed_from_the_system_copy_and_read_by_torchvision(
    tmp_path, small_idx
):
    root = tmp_path / "root"
    assert install_fashion_mnist(root, small_idx)
    split = load_split("fashion-mnist", root, train=True)
    assert split.images.shape == (96, 28, 28) and split.images.dtype == torch.uint8
    assert load_split("fashion-mnist", root, train=False).labels.shape == (40,)


def test_auto_falls_back_from_mnist_to_fashion_to_synthetic(tmp_path, small_idx, monkeypatch):
    monkeypatch.setenv("GPUBENCH_DOWNLOAD", "0")
    assert resolve_dataset("auto", tmp_path / "a", small_idx) == "fashion-mnist"
    assert resolve_dataset("auto", tmp_path / "b", tmp_path / "nothing") == "synthetic"
    synthetic = load_split("synthetic", tmp_path, train=False)
    assert synthetic.images.shape == (10_000, 28, 28)


def test_preloaded_and_dataloader_feed_the_same_normalized_values():
    split = Split(torch.randint(0, 256, (10, 28, 28), dtype=torch.uint8), torch.arange(10))
    per_image = torch.stack([ImageDataset(split)[i][0] for i in range(10)])
    torch.testing.assert_close(per_image, normalize_all(split.images))
    assert per_image.min() >= -1 and per_image.max() <= 1


class TinySource(DataSource):
    """A DataSource over a small in-memory split, for a whole epoch in a second."""

    def __init__(self, train: Split, test: Split) -> None:
        super().__init__("synthetic", Path("."))
        self._resolved = "synthetic"
        self._splits = {True: train, False: test}


@pytest.mark.parametrize("loader", ["dataloader", "preloaded"])
def test_an_epoch_sees_every_image_once(loader):
    gen = torch.Generator().manual_seed(0)
    data = TinySource(
        Split(
            torch.randint(0, 256, (300, 28, 28), dtype=torch.uint8, generator=gen),
            torch.randint(0, 10, (300,), generator=gen),
        ),
        Split(
            torch.randint(0, 256, (50, 28, 28), dtype=torch.uint8, generator=gen),
            torch.randint(0, 10, (50,), generator=gen),
        ),
    )
    case = EpochCase(batch_size=64, loader=loader, num_workers=0, pin_memory=False)
    train, test = make_loaders(case, data, torch.device("cpu"))
    result = run_epoch(
        Trainer(make_model("mlp"), torch.device("cpu"), clock=SyncedClock(torch.device("cpu"))),
        train,
        test,
        non_blocking=False,
    )
    # 4 full batches and a remainder of 44
    assert result.samples == 300 and result.steps == 5
    assert 0.0 <= result.test_accuracy <= 1.0 and result.train_loss > 0
    assert 0.0 <= result.data_wait_frac <= 1.0 and result.epoch_s > 0


def test_preloaded_loader_shuffles_a_permutation():
    images, labels = torch.arange(10.0).view(10, 1, 1, 1), torch.arange(10)
    seen = torch.cat([y for _, y in PreloadedLoader(images, labels, 4, shuffle=True)])
    assert sorted(seen.tolist()) == list(range(10))


def tiny_data(train: int = 200, test: int = 30) -> "TinySource":
    gen = torch.Generator().manual_seed(1)
    return TinySource(
        Split(
            torch.randint(0, 256, (train, 28, 28), dtype=torch.uint8, generator=gen),
            torch.randint(0, 10, (train,), generator=gen),
        ),
        Split(
            torch.randint(0, 256, (test, 28, 28), dtype=torch.uint8, generator=gen),
            torch.randint(0, 10, (test,), generator=gen),
        ),
    )


def epoch_context(data, profile: str = "smoke"):
    return BuildContext(
        torch.device("cpu"), profile, SyncedClock(torch.device("cpu")), data_source=lambda: data
    )


@pytest.mark.process
# on purpose: the case's own note says so
@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
def test_epoch_builder_warms_up_then_times_one_epoch_in_windows_with_its_figures():
    timed = mnist_epoch.set_up(EpochCase(batch_size=64, num_workers=8), epoch_context(tiny_data()))
    # one real epoch, warmed in build
    assert (timed.plan.rounds, timed.plan.iterations, timed.plan.warmup_calls) == (1, 1, 0)
    assert any("exceeds" in note for note in timed.notes) or (os.cpu_count() or 1) >= 8
    result = timed.fn()
    windows = timed.windows(result)
    # 200 images / 64: a window per step on a 4-step epoch
    assert len(windows) == result.steps == 4
    # train_s also holds the DataLoader's start and shutdown
    assert 0 < sum(windows) <= result.train_s
    figures = timed.figures(summarize(windows), result)
    assert figures["dataset"] == "synthetic" and "accuracy is meaningless" in figures["reason"]
    assert (
        figures["effective_batch"] == 64
        and figures["samples_per_s"] > 0
        and figures["compile_s"] is None
    )


def test_a_long_epoch_is_timed_in_about_ten_windows():
    data = tiny_data(train=64 * 23, test=16)
    case = EpochCase(
        batch_size=64,
        loader="preloaded",
        num_workers=None,
        pin_memory=None,
        non_blocking=None,
        persistent_workers=None,
    )
    train, test = make_loaders(case, data, torch.device("cpu"))
    seen = []
    result = run_epoch(
        # the windows, not the model
        Trainer(make_model("mlp"), torch.device("cpu"), clock=SyncedClock(torch.device("cpu"))),
        train,
        test,
        non_blocking=False,
        progress=lambda done, total: seen.append((done, total)),
    )
    # 9 windows of 2 steps, the last holds 5
    assert result.steps == 23 and len(result.window_step_s) == 10
    assert seen[0] == (2, 23) and len(seen) == 9


def test_a_diverged_epoch_is_a_failed_row_never_a_result():
    timed = mnist_epoch.set_up(
        EpochCase(
            batch_size=64,
            loader="preloaded",
            num_workers=None,
            pin_memory=None,
            non_blocking=None,
            persistent_workers=None,
        ),
        epoch_context(tiny_data()),
    )
    nan_loss = EpochResult(1.0, 0.1, 4, 200, 0.0, float("nan"), 0.1, [0.25] * 4)
    with pytest.raises(Diverged, match="train_loss is nan"):
        timed.figures(summarize([0.25] * 4), nan_loss)
    assert (
        mnist_epoch.divergence(
            EpochResult(1.0, 0.1, 4, 200, 0.0, 2.3, 0.10, [0.25]), "fashion-mnist"
        )
        is not None
    )
    # accuracy means nothing there
    assert (
        mnist_epoch.divergence(EpochResult(1.0, 0.1, 4, 200, 0.0, 2.3, 0.10, [0.25]), "synthetic")
        is None
    )
    assert (
        mnist_epoch.divergence(
            EpochResult(1.0, 0.1, 4, 200, 0.0, 0.4, 0.86, [0.25]), "fashion-mnist"
        )
        is None
    )


def test_an_insisted_dataset_that_is_missing_is_one_line_naming_root_and_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUBENCH_DOWNLOAD", "0")
    with pytest.raises(UsageError) as mnist:
        check_dataset_request("mnist", tmp_path)
    assert str(tmp_path / "MNIST" / "raw") in str(mnist.value) and "--dataset" in str(mnist.value)
    with pytest.raises(UsageError) as fashion:
        check_dataset_request("fashion-mnist", tmp_path, system_dir=tmp_path / "none")
    assert "apt-get install dataset-fashion-mnist" in str(fashion.value) and "\n" not in str(
        fashion.value
    )
    assert check_dataset_request("synthetic", tmp_path) == "synthetic"


def test_a_cold_compile_gets_an_empty_inductor_cache_and_restores_the_old_one(
    monkeypatch, tmp_path
):
    """compile_s must not depend on the cases before it: each cold compile gets an empty cache
    folder and fresh dynamo state; the user's own cache setting comes back afterwards."""
    resets = []
    monkeypatch.setattr(torch._dynamo, "reset", lambda: resets.append(1))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "users"))
    # warmed already: the compiler's warm-up is tested below
    monkeypatch.setattr(epoch, "_COMPILER_WARMED", {"cpu"})
    with fresh_compile_caches(torch.device("cpu")):
        folder = os.environ["TORCHINDUCTOR_CACHE_DIR"]
        assert (
            folder != str(tmp_path / "users") and os.path.isdir(folder) and not os.listdir(folder)
        )
        torch._dynamo.reset()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "users") and not os.path.exists(
        folder
    )
    assert len(resets) == 2


def test_the_compiler_is_warmed_once_per_process_before_the_first_cold_compile_and_outside_it(
    monkeypatch,
):
    """The first compiled case of a process must not pay inductor's imports and compile-pool start
    in its cold compile_s: a trivial compile runs first, once, before the timed first call."""
    events = []
    monkeypatch.setattr(epoch, "_COMPILER_WARMED", set())
    monkeypatch.setattr(
        torch, "compile", lambda fn, **kwargs: events.append("warm-up compile") or fn
    )
    monkeypatch.setattr(torch._dynamo, "reset", lambda: None)
    monkeypatch.setattr(
        epoch, "first_call_s", lambda trainer, batch: events.append("timed cold compile") or 1.0
    )
    cpu, clock = torch.device("cpu"), SyncedClock(torch.device("cpu"))
    case = EpochCase(
        loader="preloaded",
        num_workers=None,
        pin_memory=None,
        non_blocking=None,
        persistent_workers=None,
    )
    batch = (torch.randn(8, 1, 28, 28), torch.randint(0, 10, (8,)))
    # two compiled cases in one process
    for _ in range(2):
        cost = epoch.compile_cost(
            case, epoch.make_trainer(case, cpu, clock), batch, cpu, warm=False
        )
        assert cost.compile_s is not None
    assert events == ["warm-up compile", "timed cold compile", "timed cold compile"]


def test_the_raced_epoch_trains_in_the_winners_settings_and_its_row_says_why(monkeypatch):
    from gpubench.harness.workloads.common import epoch_race

    winner = epoch_race.RaceResult(
        "k", (epoch_race.Entry("fp32", "ok", 10, 1.0), epoch_race.Entry("fp32-cl", "ok", 20, 1.0))
    )
    monkeypatch.setattr(mnist_epoch, "race_here", lambda ctx: winner)
    raced = EpochCase(
        batch_size=64,
        loader="preloaded",
        num_workers=None,
        pin_memory=None,
        non_blocking=None,
        # its placeholder: fp32 without channels_last
        persistent_workers=None,
        raced=True,
    )
    timed = mnist_epoch.set_up(raced, epoch_context(tiny_data()))
    trainer = next(
        cell.cell_contents
        for cell in timed.fn.__closure__
        if isinstance(cell.cell_contents, Trainer)
    )
    assert trainer.memory_format == torch.channels_last and trainer.precision == "fp32"
    figures = timed.figures(
        summarize([0.1, 0.1]), EpochResult(1.0, 0.1, 4, 200, 0.0, 0.4, 0.86, [0.25] * 4)
    )
    assert (
        figures["channels_last"] is True
        and "raced on this machine: fp32-cl won" in figures["reason"]
    )


def test_a_compiled_case_is_skipped_where_compiling_is_switched_off_not_timed_eager_under_its_label(
    monkeypatch,
):
    import torch._dynamo.config as dynamo_config

    from gpubench.harness.workloads.common.train_loop import compile_skip_reason

    assert compile_skip_reason("default") is None and compile_skip_reason("none") is None
    monkeypatch.setenv("TORCH_COMPILE_DISABLE", "1")
    assert compile_skip_reason("default").startswith(
        "torch.compile is switched off here (TORCH_COMPILE_DISABLE"
    )
    assert compile_skip_reason("none") is None
    monkeypatch.delenv("TORCH_COMPILE_DISABLE")
    # what TORCHDYNAMO_DISABLE=1 sets
    monkeypatch.setattr(dynamo_config, "disable", True)
    assert "switched off" in compile_skip_reason("max-autotune")


def test_a_compiled_case_is_skipped_naming_an_inductor_cache_it_cannot_write(monkeypatch, tmp_path):
    from gpubench.harness.workloads.common import train_loop

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "new" / "cache"))
    # made on first use
    assert train_loop.compile_skip_reason("default") is None
    # as a user without the right (root passes any check)
    monkeypatch.setattr(train_loop.os, "access", lambda path, mode: False)
    assert train_loop.compile_skip_reason("default").startswith(
        f"TORCHINDUCTOR_CACHE_DIR={tmp_path / 'new' / 'cache'} cannot be written"
    )
