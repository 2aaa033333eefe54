"""A single-object classifier read over a scene: "is an object of class k anywhere in it?" (multi-label logits).

The digit scenes' second validity judge (issue 17): the MNIST zoo's judges (trained on single digits, never on
scenes) slide over a scene. Each square window is resized to the classifier's object size, padded to its input
size (the zoo's digits are 28 px inside 32 px images), classified; a class's presence probability is its highest
probability over all windows. The output is a logit against ``threshold``, so ``logit > 0`` exactly when some
window reads the class with probability above it: the model plugs into any binary (multi-label) slot, e.g. a
:class:`~hynea_pl.suts.BinaryAttributeSUT` or :class:`~hynea_pl.suts.consensus.UnanimousPresence`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from hynea_pl.suts.classifier import ClassifierSUT


def window_batches(images: torch.Tensor, size: int, stride: int) -> torch.Tensor:
    """Every ``size`` px square window of ``images (B, C, H, W)`` on a ``stride`` grid: ``(B, L, C, size, size)``."""
    b, c = images.shape[:2]
    patches = F.unfold(images, kernel_size=size, stride=stride)  # (B, C * size * size, L)
    return patches.transpose(1, 2).reshape(b, -1, c, size, size)


class DigitWindowReader(nn.Module):
    """``images (B, C, H, W) in [0, 1] -> logits (B, K)``: ``logit(p_k) - logit(threshold)``, where ``p_k`` is the
    highest probability of class ``k`` that ``reader`` gives any window.

    Args:
        reader: a multiclass classifier of single objects (its own weights and preprocessing), e.g.
            ``hynea_pl.zoo.labelled.oracle_sut.ZooOracle`` (the MNIST judges).
        sizes: window sides in pixels of the scene (the objects' sizes: scene digits are 17-28 px).
        stride: window step in pixels.
        object_size: the side each window is resized to (an MNIST digit's 28 px).
        input_size: the reader's input side; the resized window is zero-padded to it (the zoo's 32 px).
        threshold: the presence probability that maps to logit 0.
        chunk: windows classified per forward call (memory bound).
    """

    family_members = ("reader",)

    def __init__(self, reader: ClassifierSUT, sizes: Sequence[int] = (20, 24, 28, 32), stride: int = 3,
                 object_size: int = 28, input_size: int = 32, threshold: float = 0.8, chunk: int = 2048) -> None:
        super().__init__()
        if not 0 < threshold < 1:
            raise ValueError(f"threshold must be in (0, 1), got {threshold}")
        if object_size > input_size or stride < 1 or not sizes:
            raise ValueError(f"need sizes, stride >= 1 and object_size <= input_size, got {sizes}, {stride}, "
                             f"{object_size} > {input_size}")
        self.reader = reader
        self.sizes, self.stride = tuple(int(s) for s in sizes), int(stride)
        self.object_size, self.input_size = int(object_size), int(input_size)
        self.threshold, self.chunk = float(threshold), int(chunk)

    def windows(self, images: torch.Tensor) -> torch.Tensor:
        """The reader's inputs for every window of every size: ``(B, L, C, input_size, input_size)``."""
        pad = (self.input_size - self.object_size) // 2
        extra = self.input_size - self.object_size - pad
        out = []
        for size in self.sizes:
            if size > min(images.shape[-2:]):
                raise ValueError(f"window {size} px does not fit images {tuple(images.shape[-2:])}")
            w = window_batches(images, size, self.stride)
            b, n, c = w.shape[:3]
            w = F.interpolate(w.reshape(b * n, c, size, size), size=self.object_size, mode="bilinear",
                              antialias=size > self.object_size, align_corners=False)
            out.append(F.pad(w, (pad, extra, pad, extra)).reshape(b, n, c, self.input_size, self.input_size))
        return torch.cat(out, dim=1)

    def presence(self, images: torch.Tensor) -> torch.Tensor:
        """``(B, K)``: each class's highest probability over the windows (a reader with a "not a digit" answer, the
        zoo's judges: its classes only, that answer dropped)."""
        windows = self.windows(images)
        b, n = windows.shape[:2]
        flat = windows.flatten(0, 1)
        probs = torch.cat([self.reader(flat[i:i + self.chunk]).float().softmax(-1)
                           for i in range(0, len(flat), self.chunk)])
        not_a_class = getattr(self.reader, "not_a_class", None)
        if not_a_class is not None:
            probs = torch.cat([probs[:, :not_a_class], probs[:, not_a_class + 1:]], dim=1)
        return probs.reshape(b, n, -1).amax(dim=1)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        p = self.presence(images).clamp(1e-6, 1 - 1e-6)
        return torch.logit(p) - math.log(self.threshold / (1 - self.threshold))
