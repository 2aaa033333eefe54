"""A non-neural judge: k-nearest-neighbour vote over a fixed, hand-made embedding of the image.

The embedding has no learned weights. A digit is deskewed (its second image moment's shear removed and its centre
of mass moved to the centre), blurred with a Gaussian and scaled to unit length. Other images (a folder profile's)
are not deskewed: their grey levels are blurred, centred on their mean and scaled to unit length, so that neither
brightness, contrast nor colour counts, only the pattern of light and dark. The reference set is
the training digits plus shifted, rotated and elastically deformed copies of them (the augmentation a k-NN needs
to see what a CNN learns to ignore). Being of another family than every network, it errs differently.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn

from hynea_pl.zoo.augment import affine, elastic
from hynea_pl.zoo.labelled.config import KNNOracleConfig

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


def image_embedding(images: torch.Tensor, blur_sigma: float, straighten: bool = True,
                    standardize: bool = False) -> torch.Tensor:
    """``(B, C, H, W)`` in [0, 1] -> unit vectors of blurred pixels:

    - ``straighten`` (digits): deskewed grey levels ``(B, H * W)`` (RGB averaged);
    - ``standardize`` (other images): grey levels ``(B, H * W)``, each image centred on its mean before the blur;
    - neither (a folder profile's k-NN recorded before ``standardize``): every channel as it is ``(B, C * H * W)``.
    """
    if straighten:
        grey = images.float().mean(1, keepdim=True) if images.shape[1] == 3 else images.float()
        return F.normalize(gaussian_blur(deskew(grey), blur_sigma).flatten(1), dim=1)
    if standardize:  # centred before the blur, so that the blur's zero fill at the border adds no offset
        grey = images.float().mean(1, keepdim=True)
        return F.normalize(gaussian_blur(grey - grey.mean((2, 3), keepdim=True), blur_sigma).flatten(1), dim=1)
    return F.normalize(gaussian_blur(images.float(), blur_sigma).flatten(1), dim=1)


#: how many reference images are deskewed and embedded at once
EMBED_CHUNK = 8192


def augmented_copies(images: torch.Tensor, shift: int, rotations: tuple[float, ...], elastic_copies: int,
                     elastic_alpha: float, elastic_grid: int, generator: torch.Generator,
                     straighten: bool = True) -> Iterator[torch.Tensor]:
    """The k-NN's reference images, one copy of ``images (N, C, H, W)`` at a time: deskewed (when ``straighten``),
    then every shift in ``[-shift, shift]^2``, each rotation (degrees) and ``elastic_copies`` elastic deformations
    (drawn from ``generator`` in this order)."""
    straight = _chunked(deskew, images) if straighten else images
    for dy in range(-shift, shift + 1):
        for dx in range(-shift, shift + 1):
            yield torch.roll(straight, (dy, dx), (2, 3))
    n = len(images)
    for degrees in rotations:
        yield _chunked(affine, straight, torch.full((n,), degrees), torch.ones(n), torch.zeros(n, 2))
    for _ in range(elastic_copies):  # the draws of random_elastic(straight, 1.0, ...), the warp in chunks
        torch.rand(n, generator=generator)
        noise = torch.rand((n, 2, elastic_grid, elastic_grid), generator=generator) * 2 - 1
        yield _chunked(lambda chunk, displacement: elastic(chunk, displacement, elastic_alpha), straight, noise)


def _chunked(transform: Callable[..., torch.Tensor], images: torch.Tensor, *per_image: torch.Tensor) -> torch.Tensor:
    """``transform(images, *per_image)`` on :data:`EMBED_CHUNK` images at a time (each image on its own: the same
    result, a fraction of the temporaries)."""
    return torch.cat([transform(images[start:start + EMBED_CHUNK], *(x[start:start + EMBED_CHUNK] for x in per_image))
                      for start in range(0, len(images), EMBED_CHUNK)])


def reference_embeddings(images: torch.Tensor, labels: torch.Tensor,
                         cfg: KNNOracleConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The k-NN judge's reference, derived from its training images ``images (N, C, H, W)`` and ``labels (N,)`` by
    ``cfg`` (augmentation drawn from ``cfg.seed``): embeddings ``(M, D)`` and labels ``(M,)``. Deterministic, so a
    zoo entry stores the recipe, not the ``M x D`` floats. The copies are embedded as they are made, in chunks of
    :data:`EMBED_CHUNK` images into one preallocated tensor: the peak is the embeddings and a copy or two of the
    training images, not every augmented image as well."""
    straighten, standardize = deskews(cfg), standardizes(cfg)
    copies = augmented_copies(images, cfg.shift, tuple(cfg.rotations), cfg.elastic_copies, cfg.elastic_alpha,
                              cfg.elastic_grid, torch.Generator().manual_seed(cfg.seed), straighten)
    count = (2 * cfg.shift + 1) ** 2 + len(cfg.rotations) + cfg.elastic_copies
    dim = images[0, :1 if straighten or standardize else None].numel()
    embeddings = torch.empty(count * len(images), dim)
    done, pending = 0, images[:0]
    for copy in copies:
        pending = torch.cat([pending, copy])
        while len(pending) >= EMBED_CHUNK:
            embeddings[done:done + EMBED_CHUNK] = image_embedding(pending[:EMBED_CHUNK], cfg.blur_sigma, straighten,
                                                                         standardize)
            done, pending = done + EMBED_CHUNK, pending[EMBED_CHUNK:]
    if len(pending):
        embeddings[done:] = image_embedding(pending, cfg.blur_sigma, straighten, standardize)
    return embeddings, labels.repeat(count)


def deskews(cfg: KNNOracleConfig) -> bool:
    """Whether a k-NN judge's config deskews its digits (a profile of other images sets ``deskew`` off)."""
    return getattr(cfg, "deskew", True)


def standardizes(cfg: KNNOracleConfig) -> bool:
    """Whether a k-NN judge's config compares images by their centred grey levels (a folder profile's)."""
    return getattr(cfg, "standardize", False)


class KNNClassifier(nn.Module):
    """k-NN vote on raw images: ``(B, 1 or 3, H, W)`` in [0, 1] -> logits ``(B, num_classes)``, the log of the
    distance-weighted vote shares of the ``k`` nearest reference digits (smoothed, so every class is finite).

    Args:
        reference: reference embeddings ``(M, D)`` (:func:`image_embedding` of the reference digits).
        labels: their classes ``(M,)``.
        k: neighbours that vote.
        blur_sigma: the embedding's blur.
        num_classes: classes of the vote.
        deskew: deskew each digit and average RGB to grey (:func:`image_embedding`); off for images other than
            digits.
        standardize: (without ``deskew``) compare centred grey levels, not every channel as it is.
    """

    family = KNN_FAMILY

    def __init__(self, reference: torch.Tensor, labels: torch.Tensor, k: int = 5, blur_sigma: float = 1.0,
                 num_classes: int = 10, deskew: bool = True, standardize: bool = False) -> None:
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
        self.deskew, self.standardize = bool(deskew), bool(standardize)

    def distances(self, queries: torch.Tensor) -> torch.Tensor:
        """Euclidean distances ``(B, M)`` of ``queries (B, D)`` to the references, as ``|r|^2 - 2 q.r + |q|^2``
        with the references' norms kept: one pass over the references (``torch.cdist`` takes ~30x longer for one
        query against the 60000 references on a CPU)."""
        squared = self.reference_sq[None] - 2.0 * queries @ self.reference.T + queries.pow(2).sum(1, keepdim=True)
        return squared.clamp_min(0.0).sqrt()

    @torch.no_grad()
    def forward(self, images: torch.Tensor) -> torch.Tensor:
        queries = image_embedding(images, self.blur_sigma, self.deskew, self.standardize).to(self.reference.device)
        distance, index = self.distances(queries).topk(self.k, largest=False)
        weights = 1.0 / (distance + 1e-6)
        votes = torch.zeros(len(queries), self.num_classes, device=queries.device)
        votes.scatter_add_(1, self.labels[index], weights)
        shares = votes / votes.sum(1, keepdim=True)
        return (shares + 1e-3).log()
