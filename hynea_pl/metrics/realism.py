"""Realism of generated test inputs: FID, KID and precision / recall / density / coverage against real images.

Features come from any module ``images (B, C, H, W) in [0, 1] -> (B, D)``: the zoo embedder for MNIST
(:func:`hynea_pl.zoo.labelled.realism.zoo_realism_features`) or torchvision Inception-v3 from a local weights file
(``"inception"``; :class:`MetricUnavailable` when missing). Images are embedded once; the features then go to
torchmetrics' :class:`~torchmetrics.image.fid.FrechetInceptionDistance` and
:class:`~torchmetrics.image.kid.KernelInceptionDistance` (through an identity feature module, float64) and to
the ``prdc`` package (Naeem et al. 2020) when installed.

FID with few images (a campaign's 10-100 cases) is biased upwards and its covariances are rank-deficient: compare
FIDs only at equal set sizes; KID is unbiased and the better number for small sets.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torchmetrics.image.fid import FrechetInceptionDistance as _TMFID
from torchmetrics.image.kid import KernelInceptionDistance as _TMKID

from hynea_pl.metrics.backbones import InceptionFeatures
from hynea_pl.metrics.embedding import embed
from hynea_pl.metrics.weights import unavailable_entry

__all__ = ["feature_name", "realism_features", "realism_from_features", "realism_scores"]

#: KID subset size when not given: min(KID_SUBSET_SIZE, n_images, n_reference).
KID_SUBSET_SIZE = 50
#: k of the k-nearest-neighbour balls of precision / recall / density / coverage (the prdc authors' default).
PRDC_NEAREST_K = 5
PRDC_KEYS = ("precision", "recall", "density", "coverage")


class _GivenFeatures(nn.Module):
    """Identity feature module for torchmetrics: ``(B, D)`` features -> the same, as float64."""

    def __init__(self, num_features: int) -> None:
        super().__init__()
        self.num_features = int(num_features)

    def forward(self, features: Tensor) -> Tensor:
        return features.double()


def feature_name(features: nn.Module) -> str:
    """The name a features module reports in the output: its ``realism_name`` attribute or its class name."""
    return str(getattr(features, "realism_name", None) or type(features).__name__)


def _prdc(reference: Tensor, images: Tensor, nearest_k: int) -> dict[str, Any]:
    try:
        from prdc import compute_prdc
    except ImportError:
        return {k: unavailable_entry("the prdc package is not installed") for k in PRDC_KEYS}
    n = min(images.shape[0], reference.shape[0])
    if n < nearest_k + 2:
        return {k: unavailable_entry(f"needs >= {nearest_k + 2} images per set for k={nearest_k}, got {n}")
                for k in PRDC_KEYS}
    with contextlib.redirect_stdout(io.StringIO()):  # compute_prdc prints the set sizes
        values = compute_prdc(reference.double().cpu().numpy(), images.double().cpu().numpy(), nearest_k)
    return {k: float(values[k]) for k in PRDC_KEYS}


def realism_from_features(
    images: Tensor,
    reference: Tensor,
    name: str = "given",
    kid_subset_size: int | None = None,
    kid_subsets: int = 100,
    nearest_k: int = PRDC_NEAREST_K,
    seed: int = 0,
) -> dict[str, Any]:
    """Scores of features ``images (N, D)`` against ``reference (M, D)`` (see :func:`realism_scores`)."""
    images, reference = images.detach().double(), reference.detach().double().to(images.device)
    n, m = images.shape[0], reference.shape[0]
    if images.dim() != 2 or reference.dim() != 2 or images.shape[1] != reference.shape[1]:
        raise ValueError(f"expected (N, D) and (M, D) features, got {tuple(images.shape)} and {tuple(reference.shape)}")
    if min(n, m) < 2:
        raise ValueError(f"realism needs >= 2 images in each set, got {n} images and {m} reference images")
    subset = kid_subset_size if kid_subset_size is not None else min(KID_SUBSET_SIZE, n, m)
    identity = _GivenFeatures(images.shape[1])
    fid = _TMFID(feature=identity).to(images.device)
    fid.update(reference, real=True)
    fid.update(images, real=False)
    with warnings.catch_warnings():  # torchmetrics warns that KID keeps all features (here: N + M vectors)
        warnings.filterwarnings("ignore", message=".*Kernel Inception Distance.*")
        kid = _TMKID(feature=identity, subsets=kid_subsets, subset_size=subset).to(images.device)
    kid.update(reference, real=True)
    kid.update(images, real=False)
    with torch.random.fork_rng(devices=[]):  # KID draws its subsets from the global RNG: seed it, leave it as it was
        torch.manual_seed(seed)
        kid_mean, kid_std = kid.compute()
    return {
        "fid": float(fid.compute()),
        "kid_mean": float(kid_mean),
        "kid_std": float(kid_std),
        "kid_subset_size": subset,
        "kid_subsets": kid_subsets,
        **_prdc(reference, images, nearest_k),
        "prdc_nearest_k": nearest_k,
        "n_images": n,
        "n_reference": m,
        "features": name,
    }


def realism_scores(
    images: Tensor,
    reference: Tensor,
    features: nn.Module,
    kid_subset_size: int | None = None,
    kid_subsets: int = 100,
    nearest_k: int = PRDC_NEAREST_K,
    batch_size: int = 64,
    seed: int = 0,
) -> dict[str, Any]:
    """FID, KID and precision / recall / density / coverage of ``images (N, C, H, W)`` against real
    ``reference (M, C, H, W)`` images (both in [0, 1]), in the space of ``features`` (images -> (B, D)).

    Returns ``{"fid", "kid_mean", "kid_std", "kid_subset_size", "kid_subsets", "precision", "recall", "density",
    "coverage", "prdc_nearest_k", "n_images", "n_reference", "features"}``; the KID subset size defaults to
    min(50, N, M); the prdc entries are ``{"value": None, "unavailable": reason}`` without the ``prdc`` package or
    with fewer than ``nearest_k + 2`` images. ValueError with fewer than 2 images in a set.
    """
    device = next(iter(features.parameters()), images).device
    with torch.no_grad():
        feats = embed(features, images.to(device), batch_size)
        ref = embed(features, reference.to(device), batch_size)
    return realism_from_features(feats, ref, feature_name(features), kid_subset_size, kid_subsets, nearest_k, seed)


def realism_features(name: str = "inception", weights_path: str | Path | None = None) -> nn.Module:
    """A named features module: ``"inception"`` (torchvision Inception-v3 pool features, 2048-d, from
    ``weights_path`` or the torch hub cache; :class:`MetricUnavailable` when missing). The MNIST zoo's embedder
    features are :func:`hynea_pl.zoo.labelled.realism.zoo_realism_features` (this module imports nothing of the zoo)."""
    if name == "inception":
        module: nn.Module = InceptionFeatures(weights_path)
        module.realism_name = "inception_v3"
        return module
    raise ValueError(f"unknown realism features {name!r}: use 'inception', or pass a features module")
