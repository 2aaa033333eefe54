"""Control projector (Algorithm 1 of the HyNeA paper): SUT output of any rank -> bounded latent-shaped control."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from diffusers.configuration_utils import ConfigMixin, register_to_config
from diffusers.models.modeling_utils import ModelMixin
from diffusers.utils import CONFIG_NAME, SAFETENSORS_WEIGHTS_NAME
from torch import Tensor, nn

from hynea_pl.hypernets.pretrained import load_weights, require_files


class ControlProjector(ModelMixin, ConfigMixin):
    """Project a SUT signal ``(B, *signal_shape)`` to a control ``(B, C, h, w)`` in (-1, 1).

    The branch depends on how many dimensions the signal lacks compared with the latent ``(C, h, w)``:

    - same rank, a spatial map ``(C', H', W')``: a 3x3 Conv2d ``C' -> C`` (padding 1, spatial structure kept);
      if ``(H', W') != (h, w)`` the map is then resized to ``(h, w)`` by bilinear interpolation (antialiased,
      so shrinking averages rather than skips pixels).
    - one dimension fewer, ``(K, N)`` (e.g. detections: classes x N): a 1x1 Conv1d over the first axis
      ``K -> C`` (treated as channels, so the N detections are mixed by nothing but the next layer), then a
      Linear ``N -> h * w`` expands the missing spatial dimension.
    - a flat vector ``(K,)`` (logits, one-hot targets, attribute signs): a Linear ``K -> C * h * w``.

    In every branch the result is flattened, reshaped to ``(B, C, h, w)``, mixed by a 1x1 Conv2d (as in the
    authors' code) and bounded by ``tanh``.

    A diffusers model: ``signal_shape`` and ``latent_shape`` are its config, ``save_pretrained(directory)`` writes
    ``config.json`` + ``diffusion_pytorch_model.safetensors`` and :meth:`from_pretrained` reads them back.
    """

    @register_to_config
    def __init__(self, signal_shape: Sequence[int], latent_shape: Sequence[int]) -> None:
        super().__init__()
        self.signal_shape = tuple(int(s) for s in signal_shape)
        self.latent_shape = tuple(int(s) for s in latent_shape)
        if len(self.latent_shape) != 3:
            raise ValueError(f"latent_shape must be (C, h, w), got {self.latent_shape}")
        c, h, w = self.latent_shape
        rank = len(self.signal_shape)
        if rank == 3:
            self.mode = "spatial"
            self.project = nn.Conv2d(self.signal_shape[0], c, kernel_size=3, padding=1)
        elif rank == 2:
            self.mode = "sequence"
            self.project = nn.Conv1d(self.signal_shape[0], c, kernel_size=1)
            self.expand = nn.Linear(self.signal_shape[1], h * w)
        elif rank == 1:
            self.mode = "flat"
            self.project = nn.Linear(self.signal_shape[0], math.prod(self.latent_shape))
        else:
            raise ValueError(
                f"ControlProjector supports signals of rank 1, 2 or 3 (latent rank 3), got shape {self.signal_shape}"
            )
        self.mix = nn.Conv2d(c, c, kernel_size=1)

    @classmethod
    def from_pretrained(cls, directory: str | Path, torch_dtype: torch.dtype | None = None) -> ControlProjector:
        """The projector saved by ``save_pretrained`` in the local folder ``directory``, weights loaded strictly;
        a one-line ``FileNotFoundError`` / ``ValueError`` naming the folder or file when it is missing or does not
        fit."""
        folder = require_files(directory, [CONFIG_NAME, SAFETENSORS_WEIGHTS_NAME], cls.__name__)
        projector = load_weights(cls.from_config(cls.load_config(folder)), folder)
        return projector if torch_dtype is None else projector.to(torch_dtype)

    def forward(self, signal: Tensor) -> Tensor:
        """``(B, *signal_shape)`` -> ``(B, C, h, w)`` in (-1, 1)."""
        if tuple(signal.shape[1:]) != self.signal_shape:
            raise ValueError(f"expected a signal of shape (B, *{self.signal_shape}), got {tuple(signal.shape)}")
        x = signal.to(self.mix.weight.dtype)
        _, h, w = self.latent_shape
        if self.mode == "spatial":
            x = self.project(x)
            if x.shape[-2:] != (h, w):
                x = F.interpolate(x, size=(h, w), mode="bilinear", align_corners=False, antialias=True)
        elif self.mode == "sequence":
            x = self.expand(self.project(x))
        else:
            x = self.project(x)
        x = x.flatten(1).reshape(signal.shape[0], *self.latent_shape)
        return self.mix(x).tanh()
