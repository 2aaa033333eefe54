"""A zoo profile's images in fixed, disjoint splits, each with one owner, whatever their source.

Every profile's data config names its source: the MNIST digits (:class:`~hynea_pl.zoo.mnist.data.DataConfig`)
or a folder of the user's labelled images (:class:`~hynea_pl.zoo.folder.FolderDataConfig`). Both give the same
splits (:data:`SPLITS`, their ``read_splits()``):

- ``sut``: the system under test's training images;
- ``method``: everything a method may use (the steering model, the autoencoder and the LDM, the StyleGAN);
- ``judges``: the judges' and the realism embedder's training images, disjoint from the method's;

and a ``held_out`` set (their ``read_held_out()``): the realism test's reference and every calibration (the gates, the
verdict's ceiling), which no model trains on. Each data config also says its ``image_size``, ``channels`` and ``num_classes``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import Dataset, TensorDataset

from hynea_pl.images import from_levels

#: the training splits, in the order they are cut
SPLITS = ("sut", "method", "judges")

class StoredImages:
    """Images ``(N, C, S, S)`` in [0, 1] kept as uint8 levels (a folder's memory-mapped store) and converted to float
    when indexed, so that a split of a large folder is never held whole as floats.

    Indexed like a tensor along its first axis (an int, a slice or an index tensor: ``levels[index[key]] / 255``);
    ``float()`` converts every image at once, as a float tensor's ``float()`` returns it."""

    def __init__(self, levels: torch.Tensor, index: torch.Tensor) -> None:
        self.levels, self.index = levels, index

    def __len__(self) -> int:
        return len(self.index)

    @property
    def shape(self) -> torch.Size:
        return torch.Size((len(self.index), *self.levels.shape[1:]))

    def __getitem__(self, key: int | slice | torch.Tensor) -> torch.Tensor:
        return from_levels(self.levels[self.index[key]])

    def float(self) -> torch.Tensor:
        return self[:]


class _LabelledImages(Dataset):
    """``(image (C, S, S), label)`` pairs of :class:`StoredImages` and their labels, read one at a time."""

    def __init__(self, images: StoredImages, labels: torch.Tensor | None) -> None:
        self.images, self.labels = images, labels

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, ...]:
        return (self.images[i],) if self.labels is None else (self.images[i], self.labels[i])


@dataclass(frozen=True)
class ImageSplit:
    """One model's images: its training images ``(N, C, S, S)`` in [0, 1] (a float tensor, or :class:`StoredImages`
    read on demand) and labels ``(N,)`` long, and the held-out images it is measured on (a float tensor; never
    trained on)."""

    train_images: torch.Tensor | StoredImages
    train_labels: torch.Tensor
    test_images: torch.Tensor
    test_labels: torch.Tensor

    def dataset(self, labels: bool = True) -> Dataset:
        """The training images (and labels) as a dataset a ``DataLoader`` shuffles: batches of the same images in the
        same order whether the split is held as floats or read from a store."""
        if isinstance(self.train_images, StoredImages):
            return _LabelledImages(self.train_images, self.train_labels if labels else None)
        return TensorDataset(self.train_images, self.train_labels) if labels else TensorDataset(self.train_images)


@dataclass(frozen=True)
class ImageSplits:
    """A profile's disjoint training splits (:data:`SPLITS`), each with the same held-out images."""

    sut: ImageSplit
    method: ImageSplit
    judges: ImageSplit

    def __getitem__(self, name: str) -> ImageSplit:
        if name not in SPLITS:
            raise ValueError(f"unknown image split {name!r}; choose one of {list(SPLITS)}")
        return getattr(self, name)


def load_splits(data: Any) -> ImageSplits:
    """The splits of a profile's data config (MNIST or a folder: its ``read_splits()``), each with the held-out images."""
    return data.read_splits()


def held_out_of(data: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """The held-out images ``(N, C, S, S)`` in [0, 1] and labels ``(N,)`` of a profile's data config."""
    return data.read_held_out()


__all__ = ["SPLITS", "ImageSplit", "ImageSplits", "StoredImages", "held_out_of", "load_splits"]
