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

#: the training splits, in the order they are cut
SPLITS = ("sut", "method", "judges")


@dataclass(frozen=True)
class ImageSplit:
    """One model's images: its training images ``(N, C, S, S)`` float in [0, 1] and labels ``(N,)`` long, and the
    held-out images it is measured on (never trained on)."""

    train_images: torch.Tensor
    train_labels: torch.Tensor
    test_images: torch.Tensor
    test_labels: torch.Tensor


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


__all__ = ["SPLITS", "ImageSplit", "ImageSplits", "held_out_of", "load_splits"]
