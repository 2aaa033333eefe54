"""HyperNet for a conditional UNet: a trainable copy of its encoder half with zero-initialised output layers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from diffusers import ControlNetModel, UNet2DConditionModel
from torch import Tensor, nn

from hynea_pl.hypernets.control import expand_control
from hynea_pl.hypernets.pretrained import PretrainedHyperNetMixin


class UNetHyperNet(PretrainedHyperNetMixin, nn.Module):
    """ControlNet-style HyperNet built with ``ControlNetModel.from_unet``.

    The copy of ``conv_in``, the time embedding, ``down_blocks`` and ``mid_block`` starts from the UNet's
    weights; ``controlnet_down_blocks`` / ``controlnet_mid_block`` are the zero layers, so a fresh HyperNet adds
    exactly zero to the frozen UNet. The control ``(B, C, h, w)`` enters at latent resolution: it goes through
    the ControlNet's conditioning embedding (a 3x3 conv to 16 channels, SiLU and a zero-initialised 3x3 conv)
    and is added to the output of ``conv_in``.

    Args:
        unet: the frozen denoiser to copy (it is not modified).
        conditioning_channels: channels of the control; defaults to the UNet's latent channels.
        conditioning_embedding_out_channels: channels of the conditioning embedding; one entry keeps the
            control at latent resolution.

    Saving: ``save_pretrained(directory)`` writes the settings and all weights; ``from_pretrained(directory,
    unet)`` rebuilds the copy from the frozen ``unet`` and loads them.
    """

    def __init__(
        self,
        unet: UNet2DConditionModel,
        conditioning_channels: int | None = None,
        conditioning_embedding_out_channels: Sequence[int] = (16,),
    ) -> None:
        super().__init__()
        channels = conditioning_channels if conditioning_channels is not None else unet.config.in_channels
        param = next(unet.parameters())
        controlnet = ControlNetModel.from_unet(
            unet,
            conditioning_embedding_out_channels=tuple(conditioning_embedding_out_channels),
            conditioning_channels=channels,
        ).to(param.device)
        if param.dtype != controlnet.dtype:
            controlnet = controlnet.to(dtype=param.dtype)
        self.controlnet = controlnet
        self.controlnet.requires_grad_(True)
        self.conditioning_channels = channels
        self.conditioning_embedding_out_channels = tuple(int(c) for c in conditioning_embedding_out_channels)

    def hypernet_config(self) -> dict[str, Any]:
        return {"conditioning_channels": self.conditioning_channels,
                "conditioning_embedding_out_channels": list(self.conditioning_embedding_out_channels)}

    @classmethod
    def from_pretrained(cls, directory: str | Path, unet: UNet2DConditionModel) -> UNetHyperNet:
        """A fresh copy of the frozen ``unet`` with the weights saved in ``directory`` (strict)."""
        return cls(unet, **cls.read_config(directory)).load_pretrained_weights(directory)

    @property
    def zero_layers(self) -> list[nn.Module]:
        """The zero-initialised output layers (one per UNet skip connection, plus the mid block)."""
        return [*self.controlnet.controlnet_down_blocks, self.controlnet.controlnet_mid_block]

    def forward(
        self,
        sample: Tensor,
        timestep: Tensor | int,
        encoder_hidden_states: Tensor,
        control: Tensor | None,
    ) -> tuple[tuple[Tensor, ...], Tensor]:
        """Residuals for the frozen UNet.

        Args:
            sample: (scaled) model input ``(N, C, h, w)``; ``N`` is ``2B`` under classifier-free guidance.
            timestep: the current timestep.
            encoder_hidden_states: ``(N, S, D)``.
            control: ``(B, C, h, w)``, repeated to ``N`` when ``N`` is a multiple of ``B``; ``None`` means zeros.

        Returns:
            ``(down_residuals, mid_residual)``: one tensor per UNet skip connection, and one for the mid block.
        """
        n = sample.shape[0]
        if control is None:
            control = torch.zeros(
                n, self.conditioning_channels, *sample.shape[2:], device=sample.device, dtype=sample.dtype
            )
        down, mid = self.controlnet(
            sample,
            timestep,
            encoder_hidden_states=encoder_hidden_states,
            controlnet_cond=expand_control(control, n, sample.dtype),
            return_dict=False,
        )
        return tuple(down), mid
