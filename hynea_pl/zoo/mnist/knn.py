"""A non-neural digit judge: k-nearest-neighbour vote over a fixed, hand-made embedding of the digit.

The embedding has no learned weights: the digit is deskewed (its second image moment's shear removed and its
centre of mass moved to the centre), blurred with a Gaussian and scaled to unit length. The reference set is
the training digits plus shifted, rotated and elastically deformed copies of them (the augmentation a k-NN needs
to see what a CNN learns to ignore). Being of another family than every network, it errs differently.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from hynea_pl.zoo.augment import affine, random_elastic
from hynea_pl.zoo.mnist.profiles import KNNOracleConfig

#: The judge's family (see :func:`hynea_pl.suts.model_families`): no network at all.
KNN_FAMILY = "knn"


def deskew(images: torch.Tensor) -> torch.Tensor:
    """Remove each digit's slant and centre it: ``(B, 1, H, W)`` in [0, 1] -> the same shape.

    The shear is the ratio of the ink's mixed second moment to its vertical variance (the classic MNIST
    deskewing); an empty image is returned unchanged.
    """
    b, _, h, w = images.shape
    ys, xs = torch.meshgrid(torch.arange(h, dtype=images.dtype), torch.arange(w, dtype=images.dtype), indexing="ij")
    ink = images[:, 0]
    mass = ink.sum((1, 2)).clamp_min(1e-6)
    cy, cx = (ink * ys).sum((1, 2)) / mass, (ink * xs).sum((1, 2)) / mass
    dy = ys - cy[:, None, None]
    shear = (ink * dy * (xs - cx[:, None, None])).sum((1, 2)) / (ink * dy**2).sum((1, 2)).clamp_min(1e-6)
    half_h, half_w = (h - 1) / 2, (w - 1) / 2
    theta = torch.zeros(b, 2, 3, dtype=images.dtype)
    theta[:, 0, 0] = theta[:, 1, 1] = 1.0
    theta[:, 0, 1] = shear * half_h / half_w
    theta[:, 0, 2] = (cx - half_w) / half_w - shear * (cy - half_h) / half_w
    theta[:, 1, 2] = (cy - half_h) / half_h
    grid = F.affine_grid(theta, list(images.shape), align_corners=True)
    return F.grid_sample(images, grid, align_corners=True)


def gaussian_blur(images: torch.Tensor, sigma: float) -> torch.Tensor:
    """Separable Gaussian blur of ``(B, 1, H, W)`` (radius ``3 sigma``, zero padding), as two products with banded
    ``H x H`` and ``W x W`` matrices (on a CPU ~20x faster than a 1-channel convolution over many small images)."""
    radius = max(1, round(3 * sigma))
    taps = torch.arange(-radius, radius + 1, dtype=images.dtype)
    kernel = torch.exp(-(taps**2) / (2 * sigma**2))
    kernel = kernel / kernel.sum()

    def band(n: int) -> torch.Tensor:  # band[i, j] = kernel[j - i + radius]: output pixel i reads input pixel j
        offset = torch.arange(n)[None, :] - torch.arange(n)[:, None]
        near = offset.abs() <= radius
        return torch.where(near, kernel[(offset + radius).clamp(0, 2 * radius)], torch.zeros((), dtype=images.dtype))

    h, w = images.shape[-2:]
    return band(h).to(images.device) @ images @ band(w).T.to(images.device)


def digit_embedding(images: torch.Tensor, blur_sigma: float) -> torch.Tensor:
    """``(B, 1 or 3, H, W)`` in [0, 1] -> ``(B, H * W)`` unit vectors: deskewed, blurred pixels (RGB averaged)."""
    if images.shape[1] == 3:
        images = images.mean(1, keepdim=True)
    return F.normalize(gaussian_blur(deskew(images.float()), blur_sigma).flatten(1), dim=1)


def augmented_reference(images: torch.Tensor, labels: torch.Tensor, shift: int, rotations: tuple[float, ...],
                        elastic_copies: int, elastic_alpha: float, elastic_grid: int,
                        generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The k-NN's reference digits: ``images (N, 1, H, W)`` deskewed, then every shift in ``[-shift, shift]^2``,
    each rotation (degrees) and ``elastic_copies`` elastic deformations of them; returns images and labels."""
    straight = deskew(images)
    copies = [torch.roll(straight, (dy, dx), (2, 3))
              for dy in range(-shift, shift + 1) for dx in range(-shift, shift + 1)]
    n = len(images)
    for degrees in rotations:
        copies.append(affine(straight, torch.full((n,), degrees), torch.ones(n), torch.zeros(n, 2)))
    copies += [random_elastic(straight, 1.0, elastic_alpha, elastic_grid, generator) for _ in range(elastic_copies)]
    return torch.cat(copies), labels.repeat(len(copies))


def reference_embeddings(images: torch.Tensor, labels: torch.Tensor,
                         cfg: KNNOracleConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The k-NN judge's reference, derived from its training digits ``images (N, 1, H, W)`` and ``labels (N,)`` by
    ``cfg`` (augmentation drawn from ``cfg.seed``): embeddings ``(M, H * W)`` and labels ``(M,)``. Deterministic, so a
    zoo entry stores the recipe, not the ``M x H * W`` floats. Embedded in chunks: the peak is the augmented digits
    and their embeddings, not four copies of them."""
    augmented, augmented_labels = augmented_reference(
        images, labels, cfg.shift, tuple(cfg.rotations), cfg.elastic_copies, cfg.elastic_alpha, cfg.elastic_grid,
        torch.Generator().manual_seed(cfg.seed))
    embeddings = torch.cat([digit_embedding(chunk, cfg.blur_sigma) for chunk in augmented.split(8192)])
    return embeddings, augmented_labels


class KNNDigitClassifier(nn.Module):
    """k-NN vote on raw images: ``(B, 1 or 3, H, W)`` in [0, 1] -> logits ``(B, num_classes)``, the log of the
    distance-weighted vote shares of the ``k`` nearest reference digits (smoothed, so every class is finite).

    Args:
        reference: reference embeddings ``(M, D)`` (:func:`digit_embedding` of the reference digits).
        labels: their classes ``(M,)``.
        k: neighbours that vote.
        blur_sigma: the embedding's blur.
        num_classes: classes of the vote.
    """

    family = KNN_FAMILY

    def __init__(self, reference: torch.Tensor, labels: torch.Tensor, k: int = 5, blur_sigma: float = 1.0,
                 num_classes: int = 10) -> None:
        super().__init__()
        if reference.dim() != 2 or labels.shape != reference.shape[:1]:
            raise ValueError(f"expected reference (M, D) and labels (M,), got {tuple(reference.shape)} and "
                             f"{tuple(labels.shape)}")
        self.register_buffer("reference", reference.float())
        self.register_buffer("labels", labels.long())
        # the references' squared norms, for distances by one matrix product (not saved: derived from reference,
        # and derived again when a state dict replaces it)
        self.register_buffer("reference_sq", self.reference.pow(2).sum(1), persistent=False)
        self.register_load_state_dict_post_hook(lambda module, _: setattr(
            module, "reference_sq", module.reference.pow(2).sum(1)))
        self.k, self.blur_sigma, self.num_classes = int(k), float(blur_sigma), int(num_classes)

    def distances(self, queries: torch.Tensor) -> torch.Tensor:
        """Euclidean distances ``(B, M)`` of ``queries (B, D)`` to the references, as ``|r|^2 - 2 q.r + |q|^2``
        with the references' norms kept: one pass over the references (``torch.cdist`` takes ~30x longer for one
        query against the 60000 references on a CPU)."""
        squared = self.reference_sq[None] - 2.0 * queries @ self.reference.T + queries.pow(2).sum(1, keepdim=True)
        return squared.clamp_min(0.0).sqrt()

    @torch.no_grad()
    def forward(self, images: torch.Tensor) -> torch.Tensor:
        queries = digit_embedding(images, self.blur_sigma).to(self.reference.device)
        distance, index = self.distances(queries).topk(self.k, largest=False)
        weights = 1.0 / (distance + 1e-6)
        votes = torch.zeros(len(queries), self.num_classes, device=queries.device)
        votes.scatter_add_(1, self.labels[index], weights)
        shares = votes / votes.sum(1, keepdim=True)
        return (shares + 1e-3).log()
