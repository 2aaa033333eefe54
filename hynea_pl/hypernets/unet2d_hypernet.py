"""HyperNet for an unconditional ``UNet2DModel``: a trainable copy of its encoder half with zero-initialised outputs.

``diffusers.ControlNetModel.from_unet`` only accepts a ``UNet2DConditionModel``, so the copy is built here from the
``UNet2DModel``'s own submodules (time embedding, ``conv_in``, ``down_blocks``, ``mid_block``).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch
from diffusers import UNet2DModel
from torch import Tensor, nn

from hynea_pl.hypernets.control import expand_control
from hynea_pl.hypernets.pretrained import PretrainedHyperNetMixin


def zero_conv(in_channels: int, out_channels: int, kernel_size: int = 1) -> nn.Conv2d:
    """A ``Conv2d`` whose weight and bias start at zero (it outputs zeros until trained)."""
    conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
    nn.init.zeros_(conv.weight)
    nn.init.zeros_(conv.bias)
    return conv


def skip_channels(unet: UNet2DModel) -> list[int]:
    """Channels of every skip connection of ``unet`` in the order its forward collects them: ``conv_in``'s output,
    then per down block each resnet's output and each downsampler's output."""
    channels = [unet.conv_in.out_channels]
    for block in unet.down_blocks:
        if hasattr(block, "skip_conv"):
            raise NotImplementedError(f"UNet2DHyperNet does not support skip down blocks ({type(block).__name__})")
        channels += [resnet.out_channels for resnet in block.resnets]
        channels += [down.out_channels for down in (block.downsamplers or [])]
    return channels


class UNet2DHyperNet(PretrainedHyperNetMixin, nn.Module):
    """ControlNet-style HyperNet for a ``UNet2DModel`` (paper section 3.2, unconditional UNet).

    A deep copy of the UNet's time projection / embedding, ``conv_in``, ``down_blocks`` and ``mid_block`` starts
    from the frozen UNet's weights and is trainable. A zero-initialised 1x1 conv follows every skip connection of
    the copy (``conv_in``'s output, every resnet and downsampler output) and the mid block, so a fresh HyperNet
    returns all-zero residuals. The control ``(B, C, h, w)`` (latent shaped) goes through a zero-initialised 3x3 conv
    and is added to the copy's ``conv_in`` output.

    Args:
        unet: the frozen denoiser to copy (it is not modified).
        control_channels: channels of the control; defaults to the UNet's latent channels.

    Saving: ``save_pretrained(directory)`` writes the settings and all weights; ``from_pretrained(directory,
    unet)`` rebuilds the copy from the frozen ``unet`` and loads them.
    """

    def __init__(self, unet: UNet2DModel, control_channels: int | None = None) -> None:
        super().__init__()
        if getattr(unet, "class_embedding", None) is not None:
            raise NotImplementedError("UNet2DHyperNet needs an unconditional UNet2DModel (it has class embeddings)")
        self.center_input_sample = bool(unet.config.center_input_sample)
        self.control_channels = control_channels if control_channels is not None else unet.config.in_channels
        self.time_proj = copy.deepcopy(unet.time_proj)
        self.time_embedding = copy.deepcopy(unet.time_embedding)
        self.conv_in = copy.deepcopy(unet.conv_in)
        self.down_blocks = copy.deepcopy(unet.down_blocks)
        self.mid_block = copy.deepcopy(unet.mid_block)
        self.control_in = zero_conv(self.control_channels, unet.conv_in.out_channels, kernel_size=3)
        self.zero_skips = nn.ModuleList(zero_conv(c, c) for c in skip_channels(unet))
        mid_channels = unet.config.block_out_channels[-1]
        self.zero_mid = zero_conv(mid_channels, mid_channels) if self.mid_block is not None else None
        param = next(unet.parameters())
        self.to(device=param.device, dtype=param.dtype)
        self.requires_grad_(True)
        # the sinusoidal / Fourier projection is fixed, as in the frozen UNet
        self.time_proj.requires_grad_(False)

    def hypernet_config(self) -> dict[str, Any]:
        return {"control_channels": self.control_channels}

    @classmethod
    def from_pretrained(cls, directory: str | Path, unet: UNet2DModel) -> UNet2DHyperNet:
        """A fresh copy of the frozen ``unet`` with the weights saved in ``directory`` (strict)."""
        return cls(unet, **cls.read_config(directory)).load_pretrained_weights(directory)

    @property
    def zero_layers(self) -> list[nn.Module]:
        """The zero-initialised output layers (one per skip connection of the UNet, then the mid block's)."""
        return [*self.zero_skips, *([self.zero_mid] if self.zero_mid is not None else [])]

    def _embed_time(self, timestep: Tensor | int, sample: Tensor) -> Tensor:
        """Timestep (scalar or ``(N,)``) -> time embedding ``(N, D)``, as ``UNet2DModel`` computes it."""
        t = timestep if torch.is_tensor(timestep) else torch.tensor([timestep], dtype=torch.long)
        t = t.to(sample.device).reshape(-1)
        t = t * torch.ones(sample.shape[0], dtype=t.dtype, device=sample.device)
        return self.time_embedding(self.time_proj(t).to(dtype=self.conv_in.weight.dtype))

    def forward(self, sample: Tensor, timestep: Tensor | int,
                control: Tensor | None = None) -> tuple[tuple[Tensor, ...], Tensor | None]:
        """Residuals for the frozen UNet.

        Args:
            sample: (scaled) model input ``(N, C, h, w)``.
            timestep: the current timestep (scalar or ``(N,)``).
            control: ``(B, C, h, w)``, repeated to ``N`` when ``N`` is a multiple of ``B``; ``None``: no control.

        Returns:
            ``(skip_residuals, mid_residual)``: one tensor per skip connection of the UNet (shapes of its skips, in
            the order its forward collects them) and one of the mid block's output shape (``None`` without a mid
            block).
        """
        if self.center_input_sample:
            sample = 2 * sample - 1.0
        emb = self._embed_time(timestep, sample)
        hidden = self.conv_in(sample)
        if control is not None:
            hidden = hidden + self.control_in(expand_control(control, sample.shape[0], hidden.dtype))
        skips: tuple[Tensor, ...] = (hidden,)
        for block in self.down_blocks:
            hidden, res = block(hidden_states=hidden, temb=emb)
            skips += tuple(res)
        if len(skips) != len(self.zero_skips):
            raise RuntimeError(f"the UNet copy produced {len(skips)} skips, expected {len(self.zero_skips)}")
        residuals = tuple(zero(skip) for zero, skip in zip(self.zero_skips, skips, strict=True))
        mid = None
        if self.mid_block is not None:
            mid = self.zero_mid(self.mid_block(hidden, emb))
        return residuals, mid
