"""Training data: real MNIST, else real Fashion-MNIST (Debian's offline copy), else a synthetic
stand-in with identical shapes. Every row names which one it used."""

from __future__ import annotations

import gzip
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from math import prod
from pathlib import Path

import torch

from gpubench.harness.records.safe_files import probe, replacing
from gpubench.harness.core.exits import UsageError

DATASET_CHOICES = ("auto", "mnist", "fashion-mnist", "synthetic")
SYSTEM_FASHION_DIR = Path("/usr/share/datasets/fashion-mnist")
TRAIN_SIZE, TEST_SIZE, IMAGE_SIDE, CLASSES = 60_000, 10_000, 28, 10
# MNIST's (and the guide's) normalization: ToTensor scales to [0, 1], Normalize((0.5,), (0.5,)).
NORM_MEAN, NORM_STD = 0.5, 0.5
IDX_FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)


def default_data_root() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "gpubench" / "data"


def raw_dir(root: Path, name: str) -> Path:
    """torchvision's layout: <root>/MNIST/raw, <root>/FashionMNIST/raw."""
    return root / ("MNIST" if name == "mnist" else "FashionMNIST") / "raw"


def has_idx_files(folder: Path) -> bool:
    return all((folder / f).exists() or (folder / f"{f}.gz").exists() for f in IDX_FILES)


def install_fashion_mnist(root: Path, system_dir: Path = SYSTEM_FASHION_DIR) -> bool:
    """Decompress Debian's Fashion-MNIST into torchvision's raw folder (once): Debian recompressed
    it, so its md5 differs from torchvision's list and download=True would try the network."""
    target = raw_dir(root, "fashion-mnist")
    if all((target / f).exists() for f in IDX_FILES):
        return True
    if not all((system_dir / f"{f}.gz").exists() for f in IDX_FILES):
        return False
    target.mkdir(parents=True, exist_ok=True)
    # each through a random temporary beside it, renamed whole: no link followed
    for name in IDX_FILES:
        with (
            gzip.open(system_dir / f"{name}.gz", "rb") as src,
            replacing(target, name, "data folder", "pass --data-root DIR") as dst,
        ):
            shutil.copyfileobj(src, dst)
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
    # network unreachable, mirror down, disk full: fall back to the next source
    except Exception:
        return False


def how_to_get(name: str, root: Path) -> str:
    if name == "mnist":
        return (
            f"MNIST not found under {raw_dir(root, 'mnist')} and it could not be downloaded — "
            "copy the four IDX files there, or use --dataset fashion-mnist / synthetic"
        )
    return (
        f"Fashion-MNIST not found under {raw_dir(root, 'fashion-mnist')} or {SYSTEM_FASHION_DIR} — "
        "install Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist), "
        "or use --dataset synthetic"
    )


# IDX header: two zero bytes, a type byte, the number of dimensions, one big-endian uint32 per
# dimension; then the data. Only unsigned bytes (0x08) appear in (Fashion-)MNIST.
IDX_ITEM_BYTES = {0x08: 1, 0x09: 1, 0x0B: 2, 0x0C: 4, 0x0D: 4, 0x0E: 8}
IDX_DIMS = {"images": 3, "labels": 1}


def idx_defect(path: Path) -> str | None:
    """What is wrong with an IDX file (bad magic, truncated, trailing bytes), or None when its
    header fits its size."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4)
            if len(head) < 4 or head[:2] != b"\0\0" or head[2] not in IDX_ITEM_BYTES:
                return "is not an IDX file (bad magic number)"
            ndim = head[3]
            expected_ndim = IDX_DIMS["images" if "images" in path.name else "labels"]
            if ndim != expected_ndim:
                return f"has {ndim} dimensions where {expected_ndim} are expected"
            raw_dims = handle.read(4 * ndim)
        if len(raw_dims) < 4 * ndim:
            return "is truncated inside its header"
        dims = [int.from_bytes(raw_dims[i : i + 4], "big") for i in range(0, 4 * ndim, 4)]
        expected = 4 + 4 * ndim + prod(dims) * IDX_ITEM_BYTES[head[2]]
        size = path.stat().st_size
    except OSError as error:
        return f"cannot be read ({error.strerror or error})"
    if size != expected:
        return (
            f"is {'truncated' if size < expected else 'too long'}: {size} bytes where its header "
            f"({'x'.join(map(str, dims))}) says {expected}"
        )
    if "labels" in path.name:
        return label_defect(path, header_bytes=4 + 4 * ndim)
    return None


def label_defect(path: Path, header_bytes: int) -> str | None:
    """A label outside 0..CLASSES-1 would fail the first step deep in the loss; at 60 KB every byte
    is checked."""
    try:
        labels = path.read_bytes()[header_bytes:]
    except OSError as error:
        return f"cannot be read ({error.strerror or error})"
    if max(labels, default=0) < CLASSES:
        return None
    bad = [index for index, label in enumerate(labels) if label >= CLASSES]
    return (
        f"holds {len(bad)} label(s) outside 0..{CLASSES - 1} (the first: {labels[bad[0]]} at item "
        f"{bad[0]})"
    )


def how_to_restore(name: str) -> str:
    if name == "fashion-mnist":
        return f"delete it and gpubench re-extracts it from {SYSTEM_FASHION_DIR}"
    return (
        "delete it and re-download MNIST (leave GPUBENCH_DOWNLOAD unset), or copy the IDX file "
        "again"
    )


def check_dataset_files(name: str, root: Path) -> None:
    """Before any case, for the data a run will read (for auto, the folder auto picks first):
    present IDX files must be whole (a copy cut by a full disk or a killed extraction would fail
    every training case); missing ones are fetched or extracted later."""
    if name == "auto":
        name = "mnist" if has_idx_files(raw_dir(root, "mnist")) else "fashion-mnist"
    if name not in ("mnist", "fashion-mnist"):
        return
    for path in (raw_dir(root, name) / file_name for file_name in IDX_FILES):
        if path.exists() and (problem := idx_defect(path)):
            raise UsageError(f"{path} {problem} — {how_to_restore(name)}")


def _can_write(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # a random name made with O_EXCL, removed at once
        probe(folder, "data root", "pass --data-root DIR")
        return True
    except OSError:
        return False


def fallback_defect(folder: Path) -> str | None:
    """Why the shared-/tmp fallback must not be used, or None. Anyone can make it first and plant
    files (all labels 0 make any model "accurate"), so it must be this user's real folder, writable
    by no one else; made 0700 if absent."""
    try:
        # not parents: /tmp exists, only the last name is ours to make
        folder.mkdir(mode=0o700, exist_ok=True)
        info = folder.lstat()
    except OSError as error:
        return f"cannot be made ({error.strerror or error})"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a folder (a link or a file someone else made)"
    if info.st_uid != os.getuid():
        return f"belongs to uid {info.st_uid}, not to this user ({os.getuid()})"
    if info.st_mode & 0o022:
        return f"can be written by other users (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def holds_dataset(root: Path, name: str) -> bool:
    """The decompressed files `name` needs are all there (reading them needs no write access)."""
    if name == "synthetic" or name not in DATASET_CHOICES:
        # no files needed (an unknown name is refused by check_dataset_request)
        return True
    names = ("mnist", "fashion-mnist") if name == "auto" else (name,)
    return any(all((raw_dir(root, n) / f).exists() for f in IDX_FILES) for n in names)


def usable_data_root(root: Path, name: str) -> tuple[Path, str | None]:
    """The data root to use, and a warning when it is not the one asked for: an unwritable root that
    holds the data is fine, else a temporary folder takes its place, else UsageError."""
    if holds_dataset(root, name) or _can_write(root):
        return root, None
    fallback = Path(tempfile.gettempdir()) / f"gpubench-data-{os.getuid()}"
    problem = fallback_defect(fallback)
    if problem:
        raise UsageError(
            f"data root {root} is not writable, nor is {fallback} usable: it {problem} — "
            "pass --data-root DIR with a writable folder"
        )
    if _can_write(fallback):
        return fallback, (
            f"data root {root} is not writable; using {fallback} instead — "
            "pass --data-root DIR with a writable folder to keep the data"
        )
    raise UsageError(
        f"data root {root} is not writable, nor is {fallback} — "
        "pass --data-root DIR with a writable folder"
    )


def download_allowed() -> bool:
    """GPUBENCH_DOWNLOAD=0 forbids network access (offline machines, tests)."""
    return os.environ.get("GPUBENCH_DOWNLOAD", "1") != "0"


def check_dataset_request(name: str, root: Path, system_dir: Path = SYSTEM_FASHION_DIR) -> str:
    """Validate --dataset before any case; an explicit real dataset must be there."""
    if name not in DATASET_CHOICES:
        raise UsageError(f"unknown dataset {name!r}: use --dataset {', '.join(DATASET_CHOICES)}")
    if name == "fashion-mnist" and not (
        has_idx_files(raw_dir(root, name)) or has_idx_files(system_dir)
    ):
        raise UsageError(how_to_get(name, root))
    if name == "mnist" and not try_mnist(root, download=download_allowed()):
        raise UsageError(how_to_get(name, root))
    return name


def resolve_dataset(name: str, root: Path, system_dir: Path = SYSTEM_FASHION_DIR) -> str:
    """Which data a run uses: auto tries mnist (no download when offline fails), then
    Fashion-MNIST."""
    if name in ("mnist", "synthetic"):
        return name
    if name == "fashion-mnist":
        if not install_fashion_mnist(root, system_dir):
            raise UsageError(how_to_get(name, root))
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
    """The guide's per-image path, as torchvision's MNIST: uint8 -> PIL -> ToTensor + Normalize in
    the workers."""

    def __init__(self, split: Split) -> None:
        from torchvision import transforms

        self.split = split
        self.transform = transforms.Compose(
            [transforms.ToTensor(), transforms.Normalize((NORM_MEAN,), (NORM_STD,))]
        )

    def __len__(self) -> int:
        return len(self.split.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        from PIL import Image

        # 2-D uint8 -> mode "L"
        image = Image.fromarray(self.split.images[index].numpy())
        return self.transform(image), int(self.split.labels[index])


def normalize_all(images: torch.Tensor) -> torch.Tensor:
    """The whole split normalized once to [N, 1, 28, 28] float32, as ToTensor then Normalize
    would."""
    return ((images.float().div(255.0) - NORM_MEAN) / NORM_STD).unsqueeze(1)
