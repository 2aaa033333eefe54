"""Small generators with NVIDIA's style-based interface and crafted SUTs for the Mimicry / truncation tests.

- :data:`RANDOM_GENERATOR_SOURCE`: the source of a tiny *random* NVIDIA-style generator (``my_nvidia_gan.py``), written
  to a temporary folder by the tests so that it is loaded only through YAML (``class_path`` or a pickle + code_path);
- :class:`CraftedGAN`: a generator whose image is a constant grey level ``mean over layers of ws[..., 0]`` mapped to
  [0, 1]: class 0 maps to +1 on every layer, every other class to -1, the per-class centre ``w_avg`` is -1; so the
  origin (class 0) is white and truncation at ``psi`` gives grey level ``psi``;
- :func:`threshold_sut`: a SUT that reads class 0 while the mean grey level is >= ``threshold`` and class 1 below;
- :func:`write_nvidia_pickle`: an NVIDIA-style snapshot ``{"G_ema": ...}`` of the random generator plus its code
  directory (``TinyClassGenerator``: StyleGAN-XL's per-class ``w_avg (c_dim, w_dim)``; ``c_dim=0``: unconditional);
- :class:`CraftedUnconditionalGAN` (``c_dim == 0``): the grey level of ``z``'s image is ``tanh(z[0])`` in [-1, 1];
  :func:`attribute_sut`: a binary SUT whose tested attribute (index 0 of 3 logits) is present while the mean grey
  level is >= ``threshold``.
"""

from __future__ import annotations

import importlib.util
import pickle
import sys
from pathlib import Path

import torch
from torch import nn

from hynea_pl.suts import BinaryAttributeSUT, ClassifierSUT

RANDOM_GENERATOR_SOURCE = '''
import torch
from torch import nn


class Mapping(nn.Module):
    def __init__(self, z_dim, c_dim, w_dim, num_ws):
        super().__init__()
        self.num_ws = num_ws
        self.fc = nn.Linear(z_dim + c_dim, w_dim)
        self.register_buffer("w_avg", torch.zeros(w_dim))

    def forward(self, z, c, truncation_psi=1, truncation_cutoff=None, update_emas=False):
        w = torch.tanh(self.fc(torch.cat([z, c], dim=1)))
        ws = w[:, None].repeat(1, self.num_ws, 1)
        return self.w_avg.lerp(ws, truncation_psi) if truncation_psi != 1 else ws


class Synthesis(nn.Module):
    def __init__(self, w_dim, num_ws, img_resolution, img_channels):
        super().__init__()
        self.shape = (img_channels, img_resolution, img_resolution)
        self.fc = nn.Linear(w_dim * num_ws, img_channels * img_resolution ** 2)

    def forward(self, ws, noise_mode="random", force_fp32=False):
        return torch.tanh(self.fc(ws.flatten(1))).reshape(ws.shape[0], *self.shape)


class TinyGenerator(nn.Module):
    """A random generator with NVIDIA's interface: mapping, synthesis, mapping.w_avg (w_dim,), num_ws."""

    def __init__(self, z_dim=8, c_dim=10, w_dim=8, num_ws=8, img_resolution=32, img_channels=1, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.z_dim, self.c_dim, self.w_dim, self.num_ws = z_dim, c_dim, w_dim, num_ws
        self.img_resolution, self.img_channels = img_resolution, img_channels
        self.mapping = Mapping(z_dim, c_dim, w_dim, num_ws)
        self.synthesis = Synthesis(w_dim, num_ws, img_resolution, img_channels)

    def forward(self, z, c, truncation_psi=1, truncation_cutoff=None, **synthesis_kwargs):
        return self.synthesis(self.mapping(z, c, truncation_psi, truncation_cutoff), **synthesis_kwargs)


class TinyClassGenerator(TinyGenerator):
    """StyleGAN-XL's layout: one truncation centre per class, mapping.w_avg (c_dim, w_dim)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.mapping.register_buffer("w_avg", 0.1 * torch.randn(self.c_dim, self.w_dim))
'''

#: The module name the random generator's pickles refer to (their code directory must provide it).
NVIDIA_MODULE = "my_nvidia_gan"


def write_nvidia_pickle(folder: Path, class_name: str = "TinyGenerator", **init_args: object) -> tuple[Path, Path]:
    """Write ``folder/code/my_nvidia_gan.py`` and ``folder/network-snapshot.pkl`` = ``{"G_ema": <class_name>(
    **init_args)}``; return ``(pickle, code directory)``. The module is imported only while pickling, so loading the
    pickle needs its code directory (``code_path``)."""
    code = folder / "code"
    code.mkdir(parents=True, exist_ok=True)
    (code / f"{NVIDIA_MODULE}.py").write_text(RANDOM_GENERATOR_SOURCE)
    spec = importlib.util.spec_from_file_location(NVIDIA_MODULE, code / f"{NVIDIA_MODULE}.py")
    module = importlib.util.module_from_spec(spec)
    previous = sys.modules.get(NVIDIA_MODULE)
    sys.modules[NVIDIA_MODULE] = module
    try:
        spec.loader.exec_module(module)
        path = folder / "network-snapshot.pkl"
        with open(path, "wb") as f:
            pickle.dump({"G_ema": getattr(module, class_name)(**init_args)}, f)
    finally:
        if previous is None:
            sys.modules.pop(NVIDIA_MODULE, None)
        else:
            sys.modules[NVIDIA_MODULE] = previous
    return path, code


class _CraftedMapping(nn.Module):
    def __init__(self, num_ws: int, w_dim: int, c_dim: int) -> None:
        super().__init__()
        self.num_ws = num_ws
        codes = torch.zeros(c_dim, w_dim)
        codes[:, 0] = -1.0
        codes[0, 0] = 1.0
        self.register_buffer("codes", codes)
        self.register_buffer("w_avg", torch.zeros(c_dim, w_dim) + codes.new_tensor([-1.0] + [0.0] * (w_dim - 1)))

    def forward(self, z: torch.Tensor, c: torch.Tensor, **_: object) -> torch.Tensor:
        return (c @ self.codes + 0 * z[:, :1])[:, None].repeat(1, self.num_ws, 1)


class _CraftedSynthesis(nn.Module):
    def forward(self, ws: torch.Tensor, noise_mode: str = "const") -> torch.Tensor:
        level = ws[:, :, 0].mean(dim=1)  # in [-1, 1]
        return level[:, None, None, None].expand(-1, 1, 32, 32).clone()


class CraftedGAN(nn.Module):
    """See the module doc: the grey level of an image is ``mean_l ws[:, l, 0]`` in [-1, 1]."""

    def __init__(self, num_ws: int = 8, w_dim: int = 4, c_dim: int = 10) -> None:
        super().__init__()
        self.z_dim, self.c_dim, self.num_ws = 4, c_dim, num_ws
        self.mapping = _CraftedMapping(num_ws, w_dim, c_dim)
        self.synthesis = _CraftedSynthesis()
        self.anchor = nn.Parameter(torch.zeros(()))  # the wrapper reads its device from a parameter


class _Threshold(nn.Module):
    def __init__(self, threshold: float, sharpness: float, cap: float | None) -> None:
        super().__init__()
        self.threshold, self.sharpness, self.cap = threshold, sharpness, cap

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        level = images.mean(dim=(1, 2, 3))
        score = (level - self.threshold) * self.sharpness
        if self.cap is not None:  # unsure above the cap: class 0 by a small margin (p ~ 0.6)
            score = torch.where(level > self.cap, torch.full_like(score, 0.2), score)
        logits = torch.full((images.shape[0], 10), -1e4)  # classes 2..9: never, class 1 always second
        logits[:, 0], logits[:, 1] = score, -score
        return logits


class CountingSUT(ClassifierSUT):
    """Counts every image it reads (the origin included)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__(model)
        self.images_seen = 0

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        self.images_seen += images.shape[0]
        return super().forward(images)


def threshold_sut(threshold: float, sharpness: float = 200.0, cap: float | None = None) -> CountingSUT:
    """Class 0 while the mean grey level is >= ``threshold`` (ties read 0), class 1 below; other classes never.
    Above ``cap`` (when given) class 0 wins only narrowly (p ~ 0.6): such a seed fails the acceptance gate."""
    return CountingSUT(_Threshold(threshold, sharpness, cap))


class _CraftedUnconditionalMapping(nn.Module):
    def __init__(self, num_ws: int, w_dim: int) -> None:
        super().__init__()
        self.num_ws, self.w_dim = num_ws, w_dim
        self.register_buffer("w_avg", torch.zeros(w_dim))

    def forward(self, z: torch.Tensor, c: torch.Tensor, **_: object) -> torch.Tensor:
        w = torch.zeros(z.shape[0], self.w_dim, device=z.device)
        w[:, 0] = torch.tanh(z[:, 0])
        return w[:, None].repeat(1, self.num_ws, 1)


class CraftedUnconditionalGAN(nn.Module):
    """Unconditional (``c_dim == 0``): ``ws[:, l, 0] = tanh(z[:, 0])`` on every layer, the image a constant grey level
    ``mean_l ws[:, l, 0]`` in [-1, 1] (``(B, 1, 32, 32)``); so a mix with weights ``alpha`` has grey level
    ``w0 + mean(alpha) (wn - w0)`` (on ``ws[..., 0]``)."""

    def __init__(self, num_ws: int = 8, w_dim: int = 4) -> None:
        super().__init__()
        self.z_dim, self.c_dim, self.num_ws = 4, 0, num_ws
        self.mapping = _CraftedUnconditionalMapping(num_ws, w_dim)
        self.synthesis = _CraftedSynthesis()
        self.anchor = nn.Parameter(torch.zeros(()))


class _AttributeThreshold(nn.Module):
    """``images (B, C, H, W)`` -> 3 logits: attribute 0 = ``(grey - threshold) * sharpness``, 1 always present,
    2 always absent; counts the images it reads (``images_seen``)."""

    def __init__(self, threshold: float, sharpness: float) -> None:
        super().__init__()
        self.threshold, self.sharpness = threshold, sharpness
        self.images_seen = 0

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        self.images_seen += images.shape[0]
        level = images.mean(dim=(1, 2, 3))
        logits = torch.full((images.shape[0], 3), 5.0)
        logits[:, 0], logits[:, 2] = (level - self.threshold) * self.sharpness, -5.0
        return logits


def attribute_sut(threshold: float, sharpness: float = 200.0) -> BinaryAttributeSUT:
    """A binary SUT testing attribute 0: present while the mean grey level (in [0, 1]) is > ``threshold``."""
    return BinaryAttributeSUT(_AttributeThreshold(threshold, sharpness), attribute=0,
                              attribute_names=["grey", "always", "never"])
