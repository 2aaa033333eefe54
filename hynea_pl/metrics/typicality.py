"""The realism verdict's test: per image, is it as close to a real image as real images are? (the per-sample
k-NN manifold test, :mod:`hynea_pl.metrics.functional.typicality`).

:class:`TypicalityTest` is calibrated on real reference images it keeps: in each feature space (raw pixels and,
when given, an embedding) it stores every reference image's leave-one-out ``k``-NN radius; an image's score is the
largest percentile of its own radius among those, and it passes when the score is at most the ``quantile`` of
the reference images' own scores (so that ``quantile`` of held-out real images pass by construction; a second set
of real images measures how well that holds). The reference images and the embedding must never be given to a
method: they judge.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from hynea_pl.metrics.functional.typicality import knn_radius, typicality_score

__all__ = ["TypicalityTest"]


class TypicalityTest(nn.Module):
    """Per-image typicality against real ``reference`` images ``(M, C, H, W)`` in [0, 1].

    Args:
        reference: the real images (never trained on by anything a method uses).
        features: an embedding ``(B, C, H, W) -> (B, D)``; ``None``: pixel space only.
        k: the k of the k-NN radius.
        quantile: the fraction of held-out real images that pass.
    """

    def __init__(self, reference: Tensor, features: nn.Module | None = None, k: int = 1,
                 quantile: float = 0.95) -> None:
        super().__init__()
        if not 0 < quantile < 1:
            raise ValueError(f"quantile must be in (0, 1), got {quantile}")
        self.features = features.eval().requires_grad_(False) if features is not None else None
        self.k, self.quantile = int(k), float(quantile)
        self.image_shape = tuple(reference.shape[1:])
        spaces = self._embed(reference)
        for name, vectors in spaces.items():
            self.register_buffer(f"reference_{name}", vectors)
            self.register_buffer(f"calibration_{name}", knn_radius(vectors, vectors, self.k, exclude_self=True))
        own = typicality_score({name: self._calibration(name) for name in spaces}, self._calibrations())
        self.register_buffer("threshold", torch.quantile(own, self.quantile))
        #: ``(M,)``: whether each reference image passes, left out of the reference (leave-one-out)
        self.register_buffer("reference_passed", own <= self.threshold)
        #: the pass rate of the reference images, each left out of the reference (about ``quantile``)
        self.held_out_pass_rate = float(self.reference_passed.double().mean())

    @property
    def spaces(self) -> list[str]:
        return ["pixel", "embedding"] if self.features is not None else ["pixel"]

    def _calibration(self, name: str) -> Tensor:
        return getattr(self, f"calibration_{name}")

    def _calibrations(self) -> dict[str, Tensor]:
        return {name: self._calibration(name) for name in self.spaces}

    @torch.no_grad()
    def _embed(self, images: Tensor) -> dict[str, Tensor]:
        if tuple(images.shape[1:]) != self.image_shape:
            raise ValueError(f"typicality test of {self.image_shape} images got {tuple(images.shape[1:])}")
        images = images.float()
        spaces = {"pixel": images.flatten(1).double()}
        if self.features is not None:
            spaces["embedding"] = torch.cat([self.features(images[i: i + 500]) for i in range(0, len(images), 500)]
                                            ).double()
        return spaces

    @torch.no_grad()
    def readings(self, images: Tensor) -> dict[str, Tensor]:
        """Per image ``(N,)``: the k-NN radius in each space (``pixel``, ``embedding``), the combined ``score``
        (largest calibration percentile) and ``passed`` (bool)."""
        device = self.threshold.device
        radii = {name: knn_radius(vectors.to(device), getattr(self, f"reference_{name}"), self.k)
                 for name, vectors in self._embed(images.to(device)).items()}
        score = typicality_score(radii, self._calibrations())
        return {**radii, "score": score, "passed": score <= self.threshold}

    def forward(self, images: Tensor) -> Tensor:
        """``(N,)`` bool: the image passes (is as typical as ``quantile`` of the held-out real images)."""
        return self.readings(images)["passed"]

    def pass_rate(self, images: Tensor) -> float:
        """Fraction of ``images (N, C, H, W)`` that pass."""
        return float(self(images).double().mean())
