"""A method's own check of its result before it stops: is the image still a typical member of its origin's class?

:class:`AcceptanceTest` is fitted on real images of each class that the method may use (never the judges' data or the
realism test's reference). It first sets each image's levels so that its background (its median level) is 0 and its
stroke (the mean of its ``stroke_pixels`` brightest pixels) is 1, as people read a digit whatever its lighting or
contrast, then reads three things of an image ``(B, C, H, W)`` in [0, 1]:

- ``distance``: the Mahalanobis distance of its features (a method-side model's, e.g. the steering model's penultimate
  layer) to the class's mean, with one covariance shared by the classes (a blob or a smear lies far from every class);
- ``ink``: its mean level (a broken or erased digit has too little, a blob too much);
- ``contrast``: how far its stroke stands above its background (an image with next to no stroke has none).

``distance`` and ``ink`` have a range per class that ``quantile`` of that class's fitting images fall in (the
distance: an upper bound; the ink: both bounds); ``contrast`` a floor, ``min_contrast``. An image is accepted when
every reading is within its class's range. The test is the method's: it uses no judge and no reference image of the
verdict. ``benchmarks/verdict_people.py`` measures it against people's readings of other generators' digits.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["AcceptanceTest"]


class AcceptanceTest(nn.Module):
    """Per-class ranges of feature distance and ink, and a contrast floor, on images set to their own levels,
    fitted on the method's real images.

    Args:
        features: ``(B, C, H, W)`` in [0, 1] -> ``(B, D)``: a method-side model's features (frozen here).
        images: real images ``(N, C, H, W)`` in [0, 1] the method may use.
        labels: their classes ``(N,)``; every class a case can have needs a few images.
        quantile: fraction of each class's fitting images inside each of its ranges.
        stroke_pixels: how many of the brightest pixels make an image's stroke level.
        min_contrast: the least difference of stroke and background levels an accepted image has.
    """

    #: its family is its features model's (:func:`hynea_pl.suts.family.model_families`)
    family_members = ("features",)

    def __init__(self, features: nn.Module, images: Tensor, labels: Tensor, quantile: float = 0.99,
                 stroke_pixels: int = 20, min_contrast: float = 0.25) -> None:
        super().__init__()
        if not 0.5 < quantile < 1:
            raise ValueError(f"quantile must be in (0.5, 1), got {quantile}")
        if images.dim() != 4 or labels.shape != images.shape[:1]:
            raise ValueError(f"expected images (N, C, H, W) and labels (N,), got {tuple(images.shape)} and "
                             f"{tuple(labels.shape)}")
        if not 0 <= min_contrast < 1:
            raise ValueError(f"min_contrast must be in [0, 1), got {min_contrast}")
        self.features = features.eval().requires_grad_(False)
        self.quantile, self.stroke_pixels, self.min_contrast = float(quantile), int(stroke_pixels), float(min_contrast)
        self.num_classes = int(labels.max()) + 1
        counts = torch.bincount(labels, minlength=self.num_classes)
        if counts.min() < 2:
            raise ValueError(f"the acceptance test needs >= 2 images of every class, got {counts.tolist()}")
        vectors = self._embed(self.levelled(images)[0])
        means = torch.stack([vectors[labels == c].mean(0) for c in range(self.num_classes)])
        centred = vectors - means[labels]
        covariance = centred.T @ centred / max(1, len(labels) - self.num_classes)
        shrink = covariance.diagonal().mean() * 1e-3  # a small ridge keeps the inverse stable
        self.register_buffer("means", means)
        self.register_buffer("precision", torch.linalg.inv(covariance + shrink * torch.eye(len(covariance),
                                                                                         dtype=covariance.dtype)))
        readings = self._readings(self.levelled(images), labels, vectors)
        low, high = (1 - quantile) / 2, 1 - (1 - quantile) / 2

        def per_class(values: Tensor, q: float) -> Tensor:
            return torch.stack([torch.quantile(values[labels == c], q) for c in range(self.num_classes)])

        self.register_buffer("max_distance", per_class(readings["distance"], quantile))
        self.register_buffer("min_ink", per_class(readings["ink"], low))
        self.register_buffer("max_ink", per_class(readings["ink"], high))

    @torch.no_grad()
    def levelled(self, images: Tensor) -> tuple[Tensor, Tensor]:
        """Images ``(B, C, H, W)`` set to their own levels (background 0, stroke 1, clipped to [0, 1]) and their
        contrast ``(B,)``, the stroke level less the background level."""
        flat = images.detach().double().flatten(1)
        background = flat.median(1).values
        stroke = flat.topk(min(self.stroke_pixels, flat.shape[1]), dim=1).values.mean(1)
        contrast = stroke - background
        shape = (-1,) + (1,) * (images.dim() - 1)
        scaled = (images.double() - background.view(shape)) / contrast.clamp_min(1e-6).view(shape)
        return scaled.clamp(0, 1).to(images.dtype), contrast

    @torch.no_grad()
    def _embed(self, images: Tensor) -> Tensor:
        return torch.cat([self.features(chunk.float()).double() for chunk in images.split(1000)])

    def _readings(self, levelled: tuple[Tensor, Tensor], classes: Tensor, vectors: Tensor) -> dict[str, Tensor]:
        images, contrast = levelled
        centred = vectors - self.means[classes]
        distance = ((centred @ self.precision) * centred).sum(1).clamp_min(0).sqrt()
        return {"distance": distance, "ink": images.double().flatten(1).mean(1), "contrast": contrast}

    @torch.no_grad()
    def readings(self, images: Tensor, classes: Tensor) -> dict[str, Tensor]:
        """Per image ``(B,)``: ``distance``, ``ink``, ``contrast`` and ``passed`` (bool), for ``images (B, C, H, W)``
        in [0, 1] of ``classes (B,)``."""
        device = self.means.device
        images, classes = images.detach().to(device), classes.to(device).long().expand(len(images))
        if not bool(((classes >= 0) & (classes < self.num_classes)).all()):
            raise ValueError(f"the acceptance test knows classes 0-{self.num_classes - 1}, got {classes.tolist()}")
        levelled = self.levelled(images)
        found = self._readings(levelled, classes, self._embed(levelled[0]))
        found["passed"] = ((found["distance"] <= self.max_distance[classes])
                           & (found["ink"] >= self.min_ink[classes]) & (found["ink"] <= self.max_ink[classes])
                           & (found["contrast"] >= self.min_contrast))
        return found

    def forward(self, images: Tensor, classes: Tensor) -> Tensor:
        """``(B,)`` bool: each image is accepted as a member of its class."""
        return self.readings(images, classes)["passed"]
