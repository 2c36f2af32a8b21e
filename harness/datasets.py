"""Training data: real MNIST, else real Fashion-MNIST (Debian's offline copy), else a synthetic
stand-in with identical shapes. Every row names which one it used."""

from __future__ import annotations

import gzip
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch

DATASET_CHOICES = ("auto", "mnist", "fashion-mnist", "synthetic")
SYSTEM_FASHION_DIR = Path("/usr/share/datasets/fashion-mnist")
TRAIN_SIZE, TEST_SIZE, IMAGE_SIDE, CLASSES = 60_000, 10_000, 28, 10
# MNIST's (and the guide's) normalization: ToTensor scales to [0, 1], Normalize((0.5,), (0.5,)).
NORM_MEAN, NORM_STD = 0.5, 0.5
IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


class DatasetError(ValueError):
    pass


def default_data_root() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "gpubench" / "data"


def raw_dir(root: Path, name: str) -> Path:
    """torchvision's layout: <root>/MNIST/raw, <root>/FashionMNIST/raw."""
    return root / ("MNIST" if name == "mnist" else "FashionMNIST") / "raw"


def has_idx_files(folder: Path) -> bool:
    return all((folder / f).exists() or (folder / f"{f}.gz").exists() for f in IDX_FILES)


def install_fashion_mnist(root: Path, system_dir: Path = SYSTEM_FASHION_DIR) -> bool:
    """Decompress Debian's Fashion-MNIST into torchvision's raw folder (once). Their md5 differs
    from torchvision's list (Debian recompressed them), so torchvision's download=True would try
    the network; reading the decompressed files needs no check."""
    target = raw_dir(root, "fashion-mnist")
    if all((target / f).exists() for f in IDX_FILES):
        return True
    if not all((system_dir / f"{f}.gz").exists() for f in IDX_FILES):
        return False
    target.mkdir(parents=True, exist_ok=True)
    for name in IDX_FILES:
        partial = target / f"{name}.partial"
        with gzip.open(system_dir / f"{name}.gz", "rb") as src, open(partial, "wb") as dst:
            shutil.copyfileobj(src, dst)
        partial.replace(target / name)
    return True


def try_mnist(root: Path, download: bool) -> bool:
    """MNIST already under root, or fetched by torchvision when `download` (fails fast offline)."""
    if has_idx_files(raw_dir(root, "mnist")):
        return True
    if not download:
        return False
    from torchvision import datasets

    try:
        datasets.MNIST(str(root), train=True, download=True)
        datasets.MNIST(str(root), train=False, download=True)
        return True
    except Exception:  # network unreachable, mirror down, disk full: fall back to the next source
        return False


def how_to_get(name: str, root: Path) -> str:
    if name == "mnist":
        return f"MNIST not found under {raw_dir(root, 'mnist')} and it could not be downloaded — copy the four IDX files there, or use --dataset fashion-mnist / synthetic"
    return f"Fashion-MNIST not found under {raw_dir(root, 'fashion-mnist')} or {SYSTEM_FASHION_DIR} — install Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist), or use --dataset synthetic"


def download_allowed() -> bool:
    """GPUBENCH_DOWNLOAD=0 forbids network access (offline machines, tests)."""
    return os.environ.get("GPUBENCH_DOWNLOAD", "1") != "0"


def check_dataset_request(name: str, root: Path, system_dir: Path = SYSTEM_FASHION_DIR) -> str:
    """Validate --dataset before any case; an explicit real dataset must be there."""
    if name not in DATASET_CHOICES:
        raise DatasetError(f"unknown dataset {name!r}: use --dataset {', '.join(DATASET_CHOICES)}")
    if name == "fashion-mnist" and not (has_idx_files(raw_dir(root, name)) or has_idx_files(system_dir)):
        raise DatasetError(how_to_get(name, root))
    if name == "mnist" and not try_mnist(root, download=download_allowed()):
        raise DatasetError(how_to_get(name, root))
    return name


def resolve_dataset(name: str, root: Path, system_dir: Path = SYSTEM_FASHION_DIR) -> str:
    """Which data a run uses: auto tries mnist (no download when offline fails), then Fashion-MNIST."""
    if name in ("mnist", "synthetic"):
        return name
    if name == "fashion-mnist":
        if not install_fashion_mnist(root, system_dir):
            raise DatasetError(how_to_get(name, root))
        return name
    if try_mnist(root, download=download_allowed()):
        return "mnist"
    if install_fashion_mnist(root, system_dir):
        return "fashion-mnist"
    return "synthetic"


@dataclass
class Split:
    """One split as torchvision holds it: uint8 images [N, 28, 28] and int64 labels [N]."""

    images: torch.Tensor
    labels: torch.Tensor


def synthetic_split(size: int, seed: int) -> Split:
    """Random images with identical shapes and dtype; accuracy on it is meaningless."""
    gen = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 256, (size, IMAGE_SIDE, IMAGE_SIDE), dtype=torch.uint8, generator=gen)
    return Split(images, torch.randint(0, CLASSES, (size,), generator=gen))


def load_split(dataset: str, root: Path, train: bool) -> Split:
    if dataset == "synthetic":
        return synthetic_split(TRAIN_SIZE if train else TEST_SIZE, seed=0 if train else 1)
    from torchvision import datasets

    cls = datasets.MNIST if dataset == "mnist" else datasets.FashionMNIST
    data = cls(str(root), train=train, download=False)
    return Split(data.data, data.targets)


class ImageDataset(torch.utils.data.Dataset):
    """The guide's per-image path, exactly as torchvision's MNIST does it: uint8 array -> PIL
    image -> transform (ToTensor + Normalize) in the DataLoader's workers."""

    def __init__(self, split: Split) -> None:
        from torchvision import transforms

        self.split = split
        self.transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((NORM_MEAN,), (NORM_STD,))])

    def __len__(self) -> int:
        return len(self.split.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        from PIL import Image

        image = Image.fromarray(self.split.images[index].numpy())  # 2-D uint8 -> mode "L"
        return self.transform(image), int(self.split.labels[index])


def normalize_all(images: torch.Tensor) -> torch.Tensor:
    """The whole split normalized once, [N, 1, 28, 28] float32: what `preloaded` feeds the model.
    Same arithmetic as ToTensor (x / 255) followed by Normalize ((x - mean) / std)."""
    return ((images.float().div(255.0) - NORM_MEAN) / NORM_STD).unsqueeze(1)
